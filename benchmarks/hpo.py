"""Why sweeps search: Optuna (TPE, median pruning) beside the full grid, on one space of a real task.

PPO on CartPole (rl-zoo3's tuned settings otherwise), three hyperparameters: learning_rate x n_epochs
x gamma, 4 x 3 x 3 = 36 settings. The grid runs every setting to the end (`hydra/sweeper=optuna
hydra.sweeper.sampler=grid hydra.sweeper.pruner=none`: Hydra's grid, recorded as a study too); each
repeat of the search runs `--trials` trials of `hydra/sweeper=optuna` (TPE, median pruner) over the
same choices, with its own seed. Both through the joblib launcher, two jobs at a time, each command
as a user types it. For each search: its best objective as a fraction of the grid's best, and the env
steps it took as a fraction of the grid's (a pruned trial counts the steps up to its last evaluation;
a trial that repeats a finished trial's params is not run again, `hydra.sweeper.skip_duplicates`, and
counts none: `repeats`).

    python benchmarks/hpo.py                        # the grid, then 3 repeats of the search
    python benchmarks/hpo.py --repeats 1 --trials 12 --out DIR

Goal: the median repeat reaches >= 95 % of the grid's best with <= 40 % of its env steps.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hydra_plugins.framework_optuna_sweeper._impl import DUPLICATE_ATTR

SPACE = {
    "agent.hyperparams.learning_rate": ["1e-4", "3e-4", "1e-3", "3e-3"],
    "agent.hyperparams.n_epochs": ["5", "10", "20"],
    "agent.hyperparams.gamma": ["0.95", "0.98", "0.99"],
}
OBJECTIVE = "eval/return_mean"


@dataclass
class Search:
    name: str
    best: float
    steps: int
    trials: int
    pruned: int
    duplicates: int
    wall_s: float


def run(name: str, out: Path, total_steps: int, every: int, episodes: int, extra: list[str]) -> Search:
    """One sweep command in its own directory (skipped where its study is there already, finished:
    --out of an earlier run); its study read back."""

    folder = out / name
    if (folder / "optuna.db").exists() and (folder / "wall_s.txt").exists():
        return _read(name, folder, total_steps, float((folder / "wall_s.txt").read_text()))
    folder.mkdir(parents=True, exist_ok=True)
    space = [f"{key}=choice({','.join(values)})" for key, values in SPACE.items()]
    cmd = [
        sys.executable, "-m", "framework", "-m", "env=cartpole", "agent=ppo", f"total_steps={total_steps}",
        f"eval.every_steps={every}", f"eval.episodes={episodes}", "progress=log", "log_every_s=30",
        "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra/sweeper=optuna", "hydra.sweeper.n_jobs=2",
        f"hydra.sweeper.study_name={name}", *space, *extra,
    ]  # fmt: skip
    print(f"\n$ {' '.join(cmd[1:])}", flush=True)
    started = time.perf_counter()
    with open(folder / "sweep.log", "w") as log:
        code = subprocess.run(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{name}: the sweep failed ({folder / 'sweep.log'})")
    (folder / "wall_s.txt").write_text(f"{wall:.1f}")
    return _read(name, folder, total_steps, wall)


def _read(name: str, folder: Path, total_steps: int, wall: float) -> Search:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{folder / 'optuna.db'}")
    trials = study.get_trials(deepcopy=False)
    run = [t for t in trials if DUPLICATE_ATTR not in t.user_attrs]  # a duplicate took its twin's result
    steps = sum(
        total_steps if t.state == optuna.trial.TrialState.COMPLETE else (t.last_step or 0) for t in run
    )
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in trials)
    return Search(name, float(study.best_value), steps, len(trials), pruned, len(trials) - len(run), wall)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=18, help="trials of each repeat of the search")
    parser.add_argument("--total-steps", type=int, default=40_000)
    parser.add_argument("--eval-every", type=int, default=8_000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--out", type=Path, help="where the sweeps go (default: a new temporary directory)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="hpo-"))
    size = 1
    for values in SPACE.values():
        size *= len(values)
    budget = (args.total_steps, args.eval_every, args.episodes)
    grid = run("grid", out, *budget, ["hydra.sweeper.sampler=grid", "hydra.sweeper.pruner=none",
                                      f"hydra.sweeper.n_trials={size}"])  # fmt: skip
    searches = [
        run(
            f"tpe-median-{seed}",
            out,
            *budget,
            [
                "hydra.sweeper.sampler=tpe",
                "hydra.sweeper.pruner=median",
                f"hydra.sweeper.seed={seed}",
                f"hydra.sweeper.n_trials={args.trials}",
            ],
        )
        for seed in range(args.repeats)
    ]
    print(
        f"\nPPO on CartPole, {size} settings, {args.total_steps} steps each, {OBJECTIVE} over "
        f"{args.episodes} episodes"
    )
    columns = [("search", 16), ("trials", 6), ("pruned", 6), ("repeats", 7), ("best", 8), ("of best", 8),
               ("env steps", 10), ("of steps", 8), ("wall", 8)]  # fmt: skip
    print(" ".join(name.ljust(w) if name == "search" else name.rjust(w) for name, w in columns))
    ratios = []
    for s in [grid, *searches]:
        of_best, of_steps = s.best / grid.best, s.steps / grid.steps
        if s is not grid:
            ratios.append((of_best, of_steps))
        print(
            f"{s.name:<16} {s.trials:>6} {s.pruned:>6} {s.duplicates:>7} {s.best:>8.1f} {of_best:>8.2f} "
            f"{s.steps:>10,} {of_steps:>8.2f} {s.wall_s / 60:>6.1f} m"
        )
    best = statistics.median(r[0] for r in ratios)
    steps = statistics.median(r[1] for r in ratios)
    verdict = "PASS" if best >= 0.95 and steps <= 0.40 else "FAIL"
    print(f"median of {len(ratios)} repeats: {best:.2f} of the grid's best with {steps:.2f} of its env steps "
          f"-> {verdict} (goal >= 0.95 with <= 0.40)")  # fmt: skip


if __name__ == "__main__":
    main()
