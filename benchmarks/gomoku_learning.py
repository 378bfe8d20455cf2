"""AlphaZero on Gomoku, from the presets alone: train, then matches against a ladder of engines.

Each preset is trained by the command a user types (`python -m framework experiment=NAME`), in
its own process, with the preset's own periodic evaluations; it ends at its `total_steps` or is
stopped (Ctrl-C: it ends KILLED with a checkpoint) when `--budget-min` is spent, whichever comes
first. The last checkpoint then plays `--games` games at `--sims` simulations a move against each
opponent of the ladder (pure MCTS with N random rollouts a move, `mctsN`; the one-move
`heuristic`; alpha-beta over a pattern evaluation, `alphabetaD`), from random openings of
`--opening-stones` stones: each pair of games starts from one opening, colours swapped. The table
gives the training wall time, the self-play games played and the score (win = 1, draw = 1/2)
against each opponent, with its 95 % interval.

    python benchmarks/gomoku_learning.py                      # both presets, their goals below
    python benchmarks/gomoku_learning.py --preset gomoku_6x6
    python benchmarks/gomoku_learning.py --preset gomoku_9x9 --run /path/to/run   # a match only
    python benchmarks/gomoku_learning.py --preset gomoku_9x9 --run RUN --play search.forced_wins=false
    python benchmarks/gomoku_learning.py --preset gomoku_15x15 --out DIR --budget-min 90
    python benchmarks/gomoku_learning.py --preset gomoku_15x15 --out DIR --resume   # the rest of 3 h

Goals (on a 2-core CPU machine): gomoku_6x6 ≥ 0.90 against mcts1000 within 20 minutes;
gomoku_9x9 ≥ 0.80 against alphabeta2 within 60 minutes (and 1.00 against mcts1000); gomoku_15x15
≥ 0.60 against alphabeta1 and ≥ 0.90 against mcts1000 within 3 hours (`--preset all` leaves it out:
name it).
`benchmarks/gomoku_ablation.py` measures the search's options against each other with these parts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: preset → (training budget in minutes, the opponents of its match, its goals: opponent → score).
PRESETS: dict[str, tuple[float, list[str], dict[str, float]]] = {
    "gomoku_6x6": (20.0, ["mcts1000"], {"mcts1000": 0.90}),
    "gomoku_9x9": (
        60.0,
        ["mcts1000", "heuristic", "alphabeta1", "alphabeta2", "alphabeta3"],
        {"alphabeta2": 0.80, "mcts1000": 1.00},
    ),
    "gomoku_15x15": (
        180.0,
        ["mcts1000", "heuristic", "alphabeta1", "alphabeta2"],
        {"alphabeta1": 0.60, "mcts1000": 0.90},
    ),
}


#: A run directory's record of the training time spent so far (what a resumed piece adds to).
SPENT_FILE = "benchmark_spent.json"


@dataclass
class Training:
    run_dir: Path
    wall_s: float
    status: str
    steps: int
    games: int


@dataclass
class Started:
    """A training command under way."""

    name: str
    run_dir: Path
    process: subprocess.Popen[bytes]
    started: float
    budget_min: float
    log: Any
    cpu_clock: bool = False
    """Its budget counts the process's CPU time (equal compute beside other runs), not wall time."""
    before_s: float = 0.0
    """Training time the run had spent before this command (a resumed run's earlier pieces)."""

    def spent_s(self) -> float:
        """Training time spent, the earlier pieces' included."""
        return self.before_s + self._spent_here_s()

    def _spent_here_s(self) -> float:
        if not self.cpu_clock:
            return time.perf_counter() - self.started
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def start(
    preset: str,
    budget_min: float,
    out: Path,
    extra: list[str],
    name: str | None = None,
    *,
    cpu_clock: bool = False,
    resume: bool = False,
) -> Started:
    """The preset's command (with `extra` overrides), its run directory out/NAME (NAME: the preset).
    With `resume`, a run already in that directory goes on from its last checkpoint (`resume=`),
    the training time its earlier pieces spent (SPENT_FILE) counting in the budget."""
    name = name or preset
    run_dir = out / name
    before_s = 0.0
    if resume and (run_dir / SPENT_FILE).exists():
        before_s = float(json.loads((run_dir / SPENT_FILE).read_text())["seconds"])
        first = [f"resume={run_dir}", "tracking=none"]
    else:
        first = [f"experiment={preset}", "tracking=none"]
    cmd = [
        sys.executable, "-m", "framework", *first, "progress=log", f"hydra.run.dir={run_dir}", *extra,
    ]  # fmt: skip
    clock = "CPU" if cpu_clock else "wall"
    spent = f", {before_s / 60:.1f} spent before" if before_s else ""
    print(f"\n$ {' '.join(cmd[1:])}   (budget {budget_min:g} min of {clock} time{spent})", flush=True)
    log = open(out / f"{name}.log", "a" if before_s else "w")  # noqa: SIM115 - closed by finish()
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=out)
    return Started(name, run_dir, process, time.perf_counter(), budget_min, log, cpu_clock, before_s)


def finish_all(runs: list[Started]) -> list[Training]:
    """Wait for the commands; each is stopped by SIGINT (as Ctrl-C) once its budget is spent (and
    after 3x its budget of wall time, whatever its clock)."""
    stopped: dict[int, float] = {}
    spent: dict[int, float] = {id(run): run.before_s for run in runs}  # the last reading of each
    while True:
        live = [r for r in runs if r.process.poll() is None]
        if not live:
            break
        for run in live:
            try:
                spent[id(run)] = run.spent_s()
            except OSError:  # it ended since poll()
                continue
            late = time.perf_counter() - run.started > 3 * run.budget_min * 60
            if id(run) not in stopped and (spent[id(run)] >= run.budget_min * 60 or late):
                run.process.send_signal(signal.SIGINT)
                stopped[id(run)] = time.perf_counter()
            elif id(run) in stopped and time.perf_counter() - stopped[id(run)] > 600:
                run.process.kill()
        time.sleep(1.0)
    trained = []
    for run in runs:
        run.log.close()
        end = stopped.get(id(run), time.perf_counter())
        wall = run.before_s + end - run.started
        if run.process.returncode not in (0, 130) or not run.run_dir.is_dir():
            sys.exit(f"training failed (exit {run.process.returncode}); see {run.log.name}")
        used = spent[id(run)] if run.cpu_clock else run.before_s + end - run.started
        (run.run_dir / SPENT_FILE).write_text(
            json.dumps({"seconds": used, "clock": "cpu" if run.cpu_clock else "wall"})
        )
        steps, games = progress_of(run.run_dir)
        status = "stopped at the budget" if id(run) in stopped else "FINISHED"
        trained.append(Training(run.run_dir, wall, status, steps, games))
    return trained


def finish(run: Started) -> Training:
    """Wait for the command; stopped by SIGINT (as Ctrl-C) if its budget runs out first."""
    return finish_all([run])[0]


def train(preset: str, budget_min: float, out: Path, extra: list[str], *, resume: bool = False) -> Training:
    """The preset's command, stopped by SIGINT (as Ctrl-C) if the budget runs out first."""
    return finish(start(preset, budget_min, out, extra, resume=resume))


def progress_of(run_dir: Path) -> tuple[int, int]:
    """(steps, self-play games) of a run's last checkpoint."""
    from framework.checkpoint import AGENT_DIR, find_latest, read_state

    checkpoint = find_latest(run_dir)
    if checkpoint is None:
        sys.exit(f"{run_dir}: no checkpoint")
    state = json.loads((checkpoint / AGENT_DIR / "alphazero.json").read_text())
    return int(read_state(checkpoint)["step"]), int(state["counters"]["games"])


def match(
    run_dir: Path,
    opponents: list[str],
    games: int,
    sims: int,
    seed: int,
    temperature_moves: int = 0,
    search: str | None = None,
    opening_stones: int = 2,
    play: list[str] | None = None,
) -> dict[str, Any]:
    """The run's last checkpoint against each opponent: `games` games from random openings of
    `opening_stones` stones, each opening played twice with colours swapped."""
    import numpy as np

    from framework_plugins.alphazero.arena import SearchPlayer
    from framework_plugins.alphazero.matches import FixedPlayer, play_match
    from framework_plugins.gomoku.player import load_trained

    results: dict[str, Any] = {}
    overrides = [
        *([f"search={search}"] if search else []),
        f"search.num_simulations={sims}",
        f"seed={seed}",
        *(play or []),
    ]
    with load_trained(str(run_dir), overrides) as player:
        game = player.game
        for name in opponents:
            started = time.perf_counter()
            engine = player.engine(seed=seed)
            me = SearchPlayer(
                "alphazero", engine, np.random.default_rng(seed), temperature_moves=temperature_moves
            )
            them = FixedPlayer(player.env.opponent(name, seed=seed))
            result = play_match(
                game,
                me,
                them,
                games,
                opening=lambda rng: game.random_opening(rng, opening_stones),
                seed=seed,
            )
            engine.close()
            results[name] = (result, time.perf_counter() - started)
    return results


def interval(score: float, n: int) -> tuple[float, float]:
    """Wilson's 95 % interval of a score from n games."""
    z = 1.96
    centre = (score + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(score * (1 - score) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", choices=[*PRESETS, "all"], default="all")
    parser.add_argument("--budget-min", type=float, help="training budget (default: the preset's goal)")
    parser.add_argument("--games", type=int, default=50)
    parser.add_argument("--sims", type=int, default=400)
    parser.add_argument("--seed", type=int, default=12345, help="seed of the match")
    parser.add_argument(
        "--temperature-moves",
        type=int,
        default=0,
        help="moves at the start of each game drawn from the visit counts (default 0: the most visited "
        "move throughout; the random openings make the games differ)",
    )
    parser.add_argument(
        "--opening-stones", type=int, default=2, help="random stones each pair of games starts from"
    )
    parser.add_argument("--run", type=Path, help="skip training: the match for this run directory")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the preset's run in --out from its last checkpoint, the training time it spent "
        "before counting in the budget (a budget longer than one sitting, in pieces)",
    )
    parser.add_argument(
        "--match-search",
        help="the search the agent plays the match with (default: its run's; e.g. sequential, to compare "
        "runs trained with different engines on equal terms)",
    )
    parser.add_argument(
        "--play",
        action="append",
        metavar="KEY=VALUE",
        help="an override for the agent in the matches, as after `play RUN` (repeatable; e.g. "
        "search.forced_wins=false: without the solver a trained agent plays with)",
    )
    parser.add_argument("--opponents", help="comma-separated opponents (default: the preset's)")
    parser.add_argument("--out", type=Path, help="where runs go (default: a new temporary directory)")
    parser.add_argument("overrides", nargs="*", help="extra overrides for the training command")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    presets = ["gomoku_6x6", "gomoku_9x9"] if args.preset == "all" else [args.preset]
    if args.run and len(presets) != 1:
        parser.error("--run needs --preset (which preset's opponents and goal to use)")
    # A match of a given run trains nothing: no folder for runs (an empty temporary one was left behind).
    out = None if args.run else args.out or Path(tempfile.mkdtemp(prefix="gomoku-learning-"))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    rows = []
    for preset in presets:
        budget, opponents, goals = PRESETS[preset]
        opponents = args.opponents.split(",") if args.opponents else opponents
        budget = args.budget_min or budget
        if args.run:
            steps, games = progress_of(args.run)
            training = Training(args.run, float("nan"), "given", steps, games)
        else:
            assert out is not None
            training = train(preset, budget, out, args.overrides, resume=args.resume)
        wall = "given" if math.isnan(training.wall_s) else f"{training.wall_s / 60:.1f} min"
        done = f"{training.status} after {wall}"
        if args.run:
            done = f"{training.run_dir} (given: not trained here)"
        print(
            f"{preset}: {done}, {training.steps} steps, "
            f"{training.games} self-play games; match: {args.games} games at {args.sims} simulations a move, "
            f"from openings of {args.opening_stones} stones"
            + (f", {' '.join(args.play)}" if args.play else ""),
            flush=True,
        )
        for name, (result, seconds) in match(
            training.run_dir,
            opponents,
            args.games,
            args.sims,
            args.seed,
            args.temperature_moves,
            args.match_search,
            args.opening_stones,
            args.play,
        ).items():
            low, high = interval(result.score, result.games)
            verdict = ""
            if name in goals:
                # The budget, plus the minute a run stopped at it may take to save its checkpoint.
                in_time = math.isnan(training.wall_s) or training.wall_s <= budget * 60 + 60
                verdict = "PASS" if result.score >= goals[name] and in_time else "FAIL"
                verdict += f" (goal ≥ {goals[name]:.2f} within {budget:g} min)"
            rows.append(
                [
                    preset,
                    wall,
                    str(training.games),
                    name,
                    f"{result.wins}/{result.draws}/{result.losses}",
                    f"{result.score:.3f} [{low:.2f}, {high:.2f}]",
                    f"{seconds:.0f} s",
                    verdict,
                ]
            )
            print("  " + " | ".join(rows[-1][3:]), flush=True)
    header = ["preset", "training", "self-play games", "opponent", "W/D/L", "score [95 %]", "match", "goal"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
