"""PPO on the fighter against the `aggressive` opponent: the win rate it reaches, and when.

Each seed trains with the tuned preset (`conf/tuned/ppo_fighter.yaml`: 8 in-process arenas,
200k steps), by the command a user types, in its own process, tracked in a fresh MLflow store.
Every `--every` steps (and before training) it is evaluated over `--rounds` rounds against
`aggressive` alone, each round from its own game seed, so the opponent's seeded randomness
gives rounds that differ even for the deterministic policy. The table gives, per seed, the win
rate at each evaluation with its Wilson 95 % interval, the first step at which the interval's
lower end reaches `--goal`, the spread of the final evaluation's returns (0 would mean one round
played over and over) and the wall time (evaluations included).

    python benchmarks/fighter_learning.py                      # seeds 0 1 2, ~4 min each on 2 cores
    python benchmarks/fighter_learning.py --seeds 0 --rounds 200 --every 40000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "eval/aggressive"


@dataclass
class Curve:
    seed: int
    wall_s: float
    steps: list[int]
    win_rate: list[float]
    ci_low: list[float]
    ci_high: list[float]
    final_return_std: float


def train(seed: int, args: argparse.Namespace, out: Path) -> Curve:
    """One run of the preset; its evaluations read back from its MLflow store."""
    run_dir = out / f"seed{seed}"
    run_dir.mkdir()
    cmd = [
        sys.executable, "-m", "framework", "env=fighter", "agent=ppo", "env.transport=inprocess",
        f"seed={seed}", f"total_steps={args.steps}", "env.eval_opponents=[aggressive]",
        f"eval.episodes={args.rounds}", f"eval.every_steps={args.every}", "eval.video=false",
        "progress=log", f"hydra.run.dir={run_dir / 'run'}",
    ]  # fmt: skip
    print(f"$ {' '.join(cmd[1:])}", flush=True)
    started = time.perf_counter()
    with open(run_dir / "log.txt", "w") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=run_dir)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"training failed (exit {done.returncode}); see {run_dir / 'log.txt'}")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])

    def history(name: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, name))

    wins = history(f"{PREFIX}/win_rate")
    return Curve(
        seed=seed,
        wall_s=wall,
        steps=[step for step, _ in wins],
        win_rate=[value for _, value in wins],
        ci_low=[value for _, value in history(f"{PREFIX}/win_rate_ci_low")],
        ci_high=[value for _, value in history(f"{PREFIX}/win_rate_ci_high")],
        final_return_std=history(f"{PREFIX}/return_std")[-1][1],
    )


def report(curves: list[Curve], goal: float, rounds: int) -> None:
    print(f"\nwin rate against aggressive, {rounds} rounds per evaluation [Wilson 95 % interval]\n")
    print("| step | " + " | ".join(f"seed {c.seed}" for c in curves) + " |")
    print("|---|" + "---|" * len(curves))
    for i, step in enumerate(curves[0].steps):
        cells = [
            f"{c.win_rate[i]:.2f} [{c.ci_low[i]:.2f}, {c.ci_high[i]:.2f}]" if i < len(c.steps) else ""
            for c in curves
        ]
        print(f"| {step} | " + " | ".join(cells) + " |")
    print()
    for c in curves:
        reached = next((s for s, low in zip(c.steps, c.ci_low, strict=True) if low >= goal), None)
        when = f"from step {reached}" if reached is not None else "never"
        print(
            f"seed {c.seed}: interval's lower end >= {goal:g} {when}; final {c.win_rate[-1]:.2f} "
            f"[{c.ci_low[-1]:.2f}, {c.ci_high[-1]:.2f}], return std {c.final_return_std:.3f}, "
            f"{c.wall_s:.0f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=200_000, help="training steps per seed")
    parser.add_argument("--rounds", type=int, default=100, help="evaluation rounds per evaluation")
    parser.add_argument("--every", type=int, default=20_000, help="steps between evaluations")
    parser.add_argument("--goal", type=float, default=0.9, help="win rate the interval's low end must reach")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fighter_learning_") as tmp:
        curves = [train(seed, args, Path(tmp)) for seed in args.seeds]
    report(curves, args.goal, args.rounds)


if __name__ == "__main__":
    main()
