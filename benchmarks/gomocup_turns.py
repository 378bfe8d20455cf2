"""How closely the Gomocup brain keeps to a turn's time limit (`INFO timeout_turn`): the strict
figure the tests leave to a quiet machine.

For each limit and each search (tree reused or not; PUCT or Gumbel at the root), the brain plays
`--turns` turns on 15x15 with the rules alone (a uniform prior: no network) and as many
simulations as the limit allows; each turn is timed from the command to its answer, as a
tournament manager times it. Prints the median and the extremes of each turn's time as a share of
the limit, and whether every turn fell within 0.5x to 1.1x of it (the goal). Run it on a quiet
machine: a busy one delays the answer past any deadline the brain keeps.

    python benchmarks/gomocup_turns.py
    python benchmarks/gomocup_turns.py --limits 100,1000,5000 --turns 5
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import numpy as np

#: Each turn within these shares of its limit.
GOAL = (0.5, 1.1)
SEARCHES = [(True, "puct"), (False, "puct"), (False, "gumbel")]


def turn_times(limit_ms: int, reuse_tree: bool, root: str, turns: int) -> list[float]:
    """Seconds of each of `turns` turns after the first (which compiles the kernels)."""
    from framework_plugins.gomoku.gomocup import GomocupBrain
    from framework_plugins.gomoku.rules import Gomoku
    from framework_plugins.mcts.config import SequentialConfig
    from framework_plugins.mcts.engines import local_search, uniform_evaluator

    def engine(game: Gomoku) -> object:
        cfg = SequentialConfig(num_simulations=8, reuse_tree=reuse_tree, root=root)
        return local_search(cfg, game=game, evaluator_factory=uniform_evaluator(game), seed=0)

    out = io.StringIO()
    game = Gomoku(15, 5)
    brain = GomocupBrain(game, engine, num_simulations=10_000_000, about={"name": "bench"}, out=out)
    brain.serve([f"INFO timeout_turn {limit_ms}", "START 15", "BEGIN"])
    times = []
    for _ in range(turns):
        state = brain.state
        assert state is not None
        x, y = state.game.to_xy(int(np.flatnonzero(state.legal)[-1]))  # an empty cell
        started = time.perf_counter()
        brain.serve([f"TURN {x},{y}"])
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", default="100,1000", help="turn limits in ms, comma-separated")
    parser.add_argument("--turns", type=int, default=5, help="timed turns per limit and search")
    args = parser.parse_args()
    met = True
    print(f"{'limit':>7}  {'search':<16} {'median':>7} {'min':>6} {'max':>6}   (turn time / limit)")
    for limit_ms in [int(x) for x in args.limits.split(",")]:
        for reuse_tree, root in SEARCHES:
            shares = [1000 * t / limit_ms for t in turn_times(limit_ms, reuse_tree, root, args.turns)]
            ok = all(GOAL[0] <= s <= GOAL[1] for s in shares)
            met &= ok
            label = f"{root}{' reuse' if reuse_tree else ''}"
            print(
                f"{limit_ms:>5}ms  {label:<16} {statistics.median(shares):>6.2f}x {min(shares):>5.2f}x "
                f"{max(shares):>5.2f}x   {'within' if ok else 'OUTSIDE'} {GOAL[0]}x-{GOAL[1]}x"
            )
    print(f"every turn within {GOAL[0]}x-{GOAL[1]}x of its limit: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
