"""What the continuous-fours solver costs (`search.forced_wins`): per position, and to a search.

Positions: every position of games between two alpha-beta engines (`alphabeta2` against
`alphabeta1`, seeded) from random 2-stone openings, on 9x9 and 15x15, five in a row. Section 1 times
`forced_win` on each position for both players (one thread, this process's CPU time) and prints
the mean, median, 99th percentile and maximum in µs, and how many positions hold a win by fours.
Section 2 searches the same positions with the tree and the rules alone (a uniform prior, a value
of 0: `uniform_evaluator`, no network) at `--sims` simulations a move, 16 roots a call, with and
without the solver, interleaved over `--repeats` repeats, and prints the median simulations/s of
each and their ratio: the solver's share of a search without the network's time, the most it can
slow one (a network's forward, 97 % of self-play's time on a CPU, dilutes it).

    python benchmarks/gomoku_threats.py
    python benchmarks/gomoku_threats.py --sims 200 --repeats 7
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def solver_times(states: list) -> tuple[np.ndarray, int]:
    from framework_plugins.gomoku.threats import forced_win

    params = states[0].game.params
    forced_win(states[0].board.copy(), 1, params)  # compiled before timing
    times, wins = [], 0
    for state in states:
        for player in (1, -1):
            board = state.board.copy()
            started = time.process_time_ns()
            move = forced_win(board, player, params)
            times.append((time.process_time_ns() - started) / 1e3)
            wins += move >= 0
    return np.array(times), wins


def search_rates(states: list, sims: int, repeats: int) -> dict[bool, float]:
    from framework_plugins.mcts.config import SequentialConfig
    from framework_plugins.mcts.engines import local_search, uniform_evaluator

    game = states[0].game
    roots = [s for s in states if not s.done][:: max(1, len(states) // 16)][:16]
    engines = {
        solver: local_search(
            SequentialConfig(num_simulations=sims, reuse_tree=False, forced_wins=solver),
            game=game,
            evaluator_factory=uniform_evaluator(game),
            seed=0,
        )
        for solver in (False, True)
    }
    for engine in engines.values():
        engine.search(roots[:2])  # compiled before timing
    rates: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for solver, engine in engines.items():
            started = time.process_time()
            engine.search(roots)
            rates[solver].append(sims * len(roots) / (time.process_time() - started))
    return {solver: float(np.median(r)) for solver, r in rates.items()}


def main() -> None:
    from framework_plugins.gomoku.alphabeta import engine_positions
    from framework_plugins.gomoku.rules import Gomoku

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--games", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for size in (9, 15):
        states = engine_positions(Gomoku(board_size=size), args.games, black=2, seed=size)
        times, wins = solver_times(states)
        print(
            f"{size}x{size}: forced_win over {len(times)} position-players ({wins} with a win by fours): "
            f"mean {times.mean():.1f} µs, median {np.median(times):.1f}, "
            f"p99 {np.percentile(times, 99):.0f}, max {times.max():.0f}"
        )
        rates = search_rates(states, args.sims, args.repeats)
        print(
            f"  search without a network, {args.sims} simulations x 16 roots: {rates[False]:,.0f} sims/s "
            f"without the solver, {rates[True]:,.0f} with it: {rates[True] / rates[False]:.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
