"""AlphaZero on Gomoku, from the presets alone: train, then a match against pure MCTS.

Each preset is trained by the command a user types (`python -m framework experiment=NAME`), in
its own process, with the preset's own periodic evaluations; it ends at its `total_steps` or is
stopped (Ctrl-C: it ends KILLED with a checkpoint) when `--budget-min` is spent, whichever comes
first. The last checkpoint then plays a match of `--games` games, colours alternating, at
`--sims` simulations a move, against each opponent (pure MCTS with N random rollouts a move,
`mctsN`). The table gives the training wall time, the self-play games played and the score
(win = 1, draw = 1/2) against each opponent, with its 95 % interval.

    python benchmarks/gomoku_learning.py                      # both presets, their goals below
    python benchmarks/gomoku_learning.py --preset gomoku_6x6
    python benchmarks/gomoku_learning.py --preset gomoku_9x9 --run /path/to/run   # a match only

Goals (on a 2-core CPU machine): gomoku_6x6 ≥ 0.90 against mcts1000 within 20 minutes;
gomoku_9x9 ≥ 0.80 against mcts1000 within 3 hours (its score against mcts5000 is given too).
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

#: preset → (training budget in minutes, the opponents of its match, the score goal against the first).
PRESETS: dict[str, tuple[float, list[str], float]] = {
    "gomoku_6x6": (20.0, ["mcts1000"], 0.90),
    "gomoku_9x9": (180.0, ["mcts1000", "mcts5000"], 0.80),
}


@dataclass
class Training:
    run_dir: Path
    wall_s: float
    status: str
    steps: int
    games: int


def train(preset: str, budget_min: float, out: Path, extra: list[str]) -> Training:
    """The preset's command, stopped by SIGINT (as Ctrl-C) if the budget runs out first."""
    run_dir = out / preset
    cmd = [
        sys.executable, "-m", "framework", f"experiment={preset}", "tracking=none", "progress=log",
        f"hydra.run.dir={run_dir}", *extra,
    ]  # fmt: skip
    print(f"\n$ {' '.join(cmd[1:])}   (budget {budget_min:g} min)", flush=True)
    started = time.perf_counter()
    log = open(out / f"{preset}.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=out)
    status = "FINISHED"
    try:
        process.wait(timeout=budget_min * 60)
    except subprocess.TimeoutExpired:
        status = "stopped at the budget"
        process.send_signal(signal.SIGINT)
        process.wait(timeout=600)
    finally:
        log.close()
    wall = time.perf_counter() - started
    if process.returncode not in (0, 130):
        sys.exit(f"training failed (exit {process.returncode}); see {out / f'{preset}.log'}")
    steps, games = progress_of(run_dir)
    return Training(run_dir, wall, status, steps, games)


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
    temperature_moves: int,
    search: str | None = None,
) -> dict[str, Any]:
    """The run's last checkpoint against each opponent: `games` games, colours alternating."""
    import numpy as np

    from framework.matches import FixedPlayer, play_match
    from framework.trained import load_trained
    from framework_plugins.alphazero.arena import SearchPlayer

    results: dict[str, Any] = {}
    overrides = [*([f"search={search}"] if search else []), f"search.num_simulations={sims}", f"seed={seed}"]
    with load_trained(str(run_dir), overrides) as player:
        for name in opponents:
            started = time.perf_counter()
            engine = player.engine(seed=seed)
            me = SearchPlayer(
                "alphazero", engine, np.random.default_rng(seed), temperature_moves=temperature_moves
            )
            them = FixedPlayer(player.env.opponent(name, seed=seed))
            result = play_match(player.game, me, them, games)
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
        "move throughout; the opponents' random rollouts make the games differ)",
    )
    parser.add_argument("--run", type=Path, help="skip training: the match for this run directory")
    parser.add_argument(
        "--match-search",
        help="the search the agent plays the match with (default: its run's; e.g. sequential, to compare "
        "runs trained with different engines on equal terms)",
    )
    parser.add_argument("--opponents", help="comma-separated opponents (default: the preset's)")
    parser.add_argument("--out", type=Path, help="where runs go (default: a new temporary directory)")
    parser.add_argument("overrides", nargs="*", help="extra overrides for the training command")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    presets = list(PRESETS) if args.preset == "all" else [args.preset]
    if args.run and len(presets) != 1:
        parser.error("--run needs --preset (which preset's opponents and goal to use)")
    out = args.out or Path(tempfile.mkdtemp(prefix="gomoku-learning-"))
    out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    rows = []
    for preset in presets:
        budget, opponents, goal = PRESETS[preset]
        opponents = args.opponents.split(",") if args.opponents else opponents
        budget = args.budget_min or budget
        if args.run:
            steps, games = progress_of(args.run)
            training = Training(args.run, float("nan"), "given", steps, games)
        else:
            training = train(preset, budget, out, args.overrides)
        wall = "given" if math.isnan(training.wall_s) else f"{training.wall_s / 60:.1f} min"
        print(
            f"{preset}: {training.status} after {wall}, {training.steps} steps, "
            f"{training.games} self-play games; match: {args.games} games at {args.sims} simulations a move",
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
        ).items():
            low, high = interval(result.score, result.games)
            verdict = ""
            if name == opponents[0]:
                # The budget, plus the minute a run stopped at it may take to save its checkpoint.
                in_time = math.isnan(training.wall_s) or training.wall_s <= budget * 60 + 60
                verdict = "PASS" if result.score >= goal and in_time else "FAIL"
                verdict += f" (goal ≥ {goal:.2f} within {budget:g} min)"
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
    header = ["preset", "training", "games", "opponent", "W/D/L", "score [95 %]", "match", "goal"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
