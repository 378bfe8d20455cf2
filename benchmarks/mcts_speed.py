"""Tree-search speed on Gomoku: our compiled MCTS beside a plain-Python AlphaZero MCTS, and with a
network, self-play beside the network's own batched forward rate.

Section 1 (the tree and the rules alone): a 15x15 board, 5 in a row (freestyle), `--sims`
simulations (800) from a fresh tree, with a uniform prior (all empty cells equally likely)
and a value of 0, so no network is involved. Two sides search the same positions:

- reference: a naive MCTS written here the way the popular public Gomoku AlphaZero projects write
  it (junxiaosong/AlphaZero_Gomoku's mcts_alphaZero.py, alpha-zero-general): a Python object per
  node with a dict of children {action: node} and N, W, P; every simulation deep-copies the board
  (an object holding a dict {cell: player} and a list of empty cells), walks down by PUCT, expands
  all legal moves, evaluates the leaf and backs up along the path;
- ours: framework_plugins.mcts.puct.PuctSearch, made by search=sequential (reuse_tree=False), with
  uniform_evaluator, asked for one root at a time (B=1) and for all the roots in one call (B=8,
  one leaf per root per simulation, as self-play does).

Both play the same game the same way: a win is checked through the last move only; PUCT is
Q + c_puct * P * sqrt(N_parent) / (1 + N_child) with c_puct = 2.0 and an unvisited child worth 0.0
(first-play urgency); a terminal leaf is backed up without evaluation, and so is a leaf where the
player to move has a winning move (our detect_wins=True), as lost for the side that moved there.
The reference finds such a move by checking the empty cells next to the mover's stones, as our
kernel does. Before timing, both must pass checks: visits add up to `--sims` at every root, the
winning move and the only block get most visits, and the two sides' visit counts are compared.

Eight roots are searched per repeat: the empty board and seven quiet openings (2 to 14 stones in
the centre, no immediate win for either side); ours at B=1 and the reference search them one by
one, ours at B=8 in one call. Simulations/s = sims * roots / seconds; the table shows medians over
`--repeats` repeats, timed by default with this process's CPU time (one thread; `--clock wall`
for wall time). Our first call, which compiles the numba kernels, is timed on its own. The
project's target is ours >= 30x the reference.

Section 2 (with a network): the same board, a PolicyValueNet with a 3x3 stem convolution and
`--blocks` (1) residual blocks of 64 channels, that is 4 convolutions deep (stem, the block's two,
a head's 1x1) with one block, evaluated in inference mode on `--device` (auto: cuda when available)
by each backend of `--backends` (torch: eager fp32, NetworkEvaluator; torch_half; onnxruntime), over
`--net-threads` x `--groups` (the run's threads= and search.pipeline_groups). For each batch size
B in `--batches` (8,32 on a CPU, 8,64,256 on a GPU), two measurements are interleaved, `--repeats`
times each, in wall time (`--net-clock cpu`: this process's CPU time, on a CPU only, steadier on a
busy machine):

- forward: NetworkEvaluator's positions/s on B realistic positions (planes [B, 4, n, n] float32 of
  games of 0 to 60 random moves), called over and over for about as long as a runner measurement;
- runner: self-play as agent=alphazero plays it: a VectorizeRunner of B games (temperature and noise
  as the agent's defaults) over a search=sequential (`--net-sims` simulations a move, 200, subtree
  reuse) whose evaluator is a NetworkEvaluator of the same network; simulations/s = the engine's
  simulations over the time of `--net-steps` runner.step() calls (1 move in every game each).
  The first step (compiling, the empty board's first search) is left out.

The table shows medians: the target is runner >= 0.8x forward at the same B. It also shows the
network's share of the runner's time (the rest is the tree, the rules and the runner), the network's
own rate inside the runner, and the self-play rate (moves/s over all B games, and finished games/s
where any finished).

The inference backends side by side (eager torch, ONNX Runtime, half precision):
`benchmarks/inference_backends.py`.

    python benchmarks/mcts_speed.py [--section 1|2|all] [--repeats 5] [--sims 800] [--board 15]
        [--clock cpu|wall] [--batches 8,32] [--device auto|cpu|cuda] [--blocks 1] [--net-sims 200]
        [--net-steps 1] [--net-clock wall|cpu] [--mallopt] [--threads 1,2] [--roots 256]
        [--backends torch,torch_half] [--net-threads 1,16] [--groups 1,2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mcts_network import network_section
from mcts_reference import BLACK, N_IN_ROW, WHITE, ReferenceMCTS, reference_board
from tables import CLOCKS, print_machine, print_table, thread_counts

from framework.machine import short_openmp_spin

# As `python -m framework` does, before torch is imported: OpenMP's workers spin briefly between
# regions (the network and the tree take turns on the cores).
short_openmp_spin()

N_ROOTS = 8
TARGET = 30.0


# -- ours ------------------------------------------------------------------------------------------------


def make_engine(size: int, sims: int, threads: int = 1) -> Any:
    from framework_plugins.gomoku.rules import Gomoku
    from framework_plugins.mcts.config import SequentialConfig
    from framework_plugins.mcts.engines import local_search, uniform_evaluator

    game = Gomoku(size, N_IN_ROW)
    cfg = SequentialConfig(num_simulations=sims, reuse_tree=False)
    return local_search(cfg, game=game, evaluator_factory=uniform_evaluator(game), seed=0, threads=threads)


# -- positions -------------------------------------------------------------------------------------------


def our_state(size: int, moves: Sequence[int]) -> Any:
    from framework_plugins.gomoku.rules import GameState, Gomoku

    return GameState.from_moves(Gomoku(size, N_IN_ROW), list(moves))


def quiet_openings(size: int, count: int, seed: int) -> list[list[int]]:
    """The empty board and count-1 openings of 2, 4, ... central stones, no win in one for either side."""
    rng = random.Random(seed)
    lo, hi = max(size // 2 - 3, 0), min(size // 2 + 3, size - 1)
    centre = [y * size + x for y in range(lo, hi + 1) for x in range(lo, hi + 1)]
    openings: list[list[int]] = [[]]
    while len(openings) < count:
        moves = rng.sample(centre, 2 * len(openings))
        board = reference_board(size, moves)
        if not board.has_winning_move(BLACK) and not board.has_winning_move(WHITE):
            openings.append(moves)
    return openings


def tactical_positions(size: int) -> dict[str, tuple[list[int], int]]:
    """{name: (moves, the one good move)} with black to move: a four to complete, and one to block."""
    assert N_IN_ROW == 5 and size >= 9, "the tactical positions are laid out for 5 in a row on 9x9 or more"
    row, x0 = size // 2, size // 2 - 2
    cell = lambda x, y: y * size + x  # noqa: E731
    corners = [cell(1, 1), cell(size - 2, size - 2), cell(size - 2, 1)]
    # Black: four in a row at (x0..x0+3, row), blocked on the left; white: the block and three far stones.
    black = [cell(x0 + i, row) for i in range(4)]
    white = [cell(x0 - 1, row), *corners]
    win = [m for pair in zip(black, white, strict=True) for m in pair]
    # White: four in a row, blocked on the left by black; black: the block and three far stones.
    white = [cell(x0 + i, row) for i in range(4)]
    black = [cell(x0 - 1, row), *corners]
    block = [m for pair in zip(black, white, strict=True) for m in pair]
    return {
        "black completes its four": (win, cell(x0 + 4, row)),
        "black blocks white's four": (block, cell(x0 + 4, row)),
    }


# -- checks ----------------------------------------------------------------------------------------------


def check(engine: Any, reference: ReferenceMCTS, size: int, sims: int, openings: list[list[int]]) -> None:
    """Visits add up to sims on both sides; the good move of each tactical position gets most visits;
    the two sides' visit counts are compared root by root (same rules, PUCT and tie-break order)."""
    print("checks:")
    for name, (moves, good) in tactical_positions(size).items():
        ours = engine.search([our_state(size, moves)]).visits[0]
        ref = np.array(reference.search(reference_board(size, moves)))
        for side, counts in (("ours", ours), ("reference", ref)):
            total = int(counts.sum())
            assert total == sims, f"{name}: {side}'s visits add up to {total}, not {sims}"
            best = int(np.argmax(counts))
            assert best == good, f"{name}: {side} puts most visits on {best}, not {good} ({counts[best]:.0f})"
        print(
            f"  {name}: move {good} (x={good % size}, y={good // size}) gets {ours[good]:.0f} of {sims}"
            f" visits in ours, {ref[good]} in the reference (the most in both)"
        )
    same, worst = 0, 0
    ours_all = engine.search([our_state(size, m) for m in openings]).visits
    for moves, ours in zip(openings, ours_all, strict=True):
        ref = np.array(reference.search(reference_board(size, moves)))
        assert int(ours.sum()) == sims and int(ref.sum()) == sims, "visits do not add up to sims"
        diff = int(np.abs(ours - ref).max())
        same += diff == 0
        worst = max(worst, diff)
    print(
        f"  quiet openings: visits add up to {sims} at all {len(openings)} roots on both sides; identical"
        f" visit counts at {same} of {len(openings)} roots (largest difference {worst})"
    )


# -- timing ----------------------------------------------------------------------------------------------


def rates(run: Callable[[], None], n_sims: int, repeats: int, clock: Callable[[], float]) -> list[float]:
    """Simulations per second of each of `repeats` calls of `run`, which runs n_sims simulations."""
    out = []
    for _ in range(repeats):
        t0 = clock()
        run()
        out.append(n_sims / (clock() - t0))
    return out


def tree_section(args: argparse.Namespace) -> None:
    """Section 1: the tree and the rules alone (uniform prior, value 0), ours against the reference."""
    size, sims, clock = args.board, args.sims, CLOCKS[args.clock]
    openings = quiet_openings(size, N_ROOTS, seed=0)
    states = [our_state(size, m) for m in openings]
    boards = [reference_board(size, m) for m in openings]
    reference = ReferenceMCTS(sims)
    engine = make_engine(size, sims)
    print(
        f"\n== section 1: tree and rules alone: {size}x{size}, {N_IN_ROW} in a row, {sims} simulations from"
        f" a fresh tree, uniform prior, value 0; {len(openings)} roots of"
        f" {', '.join(str(len(m)) for m in openings)} stones =="
    )

    t0 = time.perf_counter()
    engine.search(states[:1])
    first_b1 = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine.search(states)
    first_b8 = time.perf_counter() - t0
    print(f"ours compile/warm-up (wall): first call B=1 {first_b1:.2f} s, then B={N_ROOTS} {first_b8:.2f} s")
    check(engine, reference, size, sims, openings)

    def run_reference() -> None:
        for board in boards:
            reference.search(board)

    def run_ours_b1() -> None:
        for state in states:
            engine.search([state])

    def run_ours_batch() -> None:
        engine.search(states)

    n_sims = sims * len(openings)
    sides = {
        "reference (Python objects, deepcopy)": run_reference,
        "ours, B=1 (one root per call)": run_ours_b1,
        f"ours, B={N_ROOTS} (all roots in one call)": run_ours_batch,
    }
    print(f"timing: {args.repeats} repeats of {len(openings)} roots x {sims} simulations a side", flush=True)
    results = {}
    for name, run in sides.items():
        if run is not run_reference:
            run()  # untimed: our kernels' first call for this batch size (the reference has nothing to warm)
        results[name] = rates(run, n_sims, args.repeats, clock)
        print(f"  {name}: {statistics.median(results[name]):,.0f} sims/s", flush=True)

    base = statistics.median(next(iter(results.values())))
    print(f"\nsimulations/s, {args.clock} time, median (min-max) of {args.repeats} repeats\n")
    header = ["side", "median sims/s", "min-max sims/s", f"ms per root ({sims} sims)", "ours / reference"]
    lines = []
    for name, values in results.items():
        median = statistics.median(values)
        lines.append([
            name,
            f"{median:,.0f}",
            f"{min(values):,.0f}-{max(values):,.0f}",
            f"{sims / median * 1000:.2f}",
            f"{median / base:.1f}x",
        ])  # fmt: skip
    print_table(header, lines)
    print(f"  (a B={N_ROOTS} call searches {N_ROOTS} roots at once: it takes {N_ROOTS}x its 'ms per root')")
    for name in list(results)[1:]:
        ratio = statistics.median(results[name]) / base
        met = "met" if ratio >= TARGET else "MISSED"
        print(f"  [{met}] {name} >= {TARGET:.0f}x reference: {ratio:.1f}x")
    threads_section(args)


def threads_section(args: argparse.Namespace) -> None:
    """Section 1, on threads: `--roots` roots in one call, the tree kernels on 1, 2, ... N threads
    (search threads=N), wall time, side by side; every count must give the same visits."""
    from framework_plugins.mcts.threads import usable_threads

    size, sims, counts = args.board, args.sims, thread_counts(args.threads)
    openings = quiet_openings(size, N_ROOTS, seed=0)
    states = [our_state(size, openings[i % len(openings)]) for i in range(args.roots)]
    print(
        f"\n== section 1, threads: {args.roots} roots (the {len(openings)} above, repeated) x {sims}"
        f" simulations in one call, the tree kernels on {', '.join(map(str, counts))} thread(s) (search"
        f" threads=N; numba's pool here: {usable_threads(0)}), wall time, interleaved repeats ==",
        flush=True,
    )
    engines = {t: make_engine(size, sims, threads=t) for t in counts}
    first = {t: engine.search(states).visits for t, engine in engines.items()}  # compiling, untimed
    for t, visits in first.items():
        assert np.array_equal(visits, first[counts[0]]), f"{t} threads gave other visits than {counts[0]}"
    print(f"  checks: the same visits at all {args.roots} roots on every thread count", flush=True)
    rates_by: dict[int, list[float]] = {t: [] for t in counts}
    for r in range(args.repeats):
        for t in counts if r % 2 == 0 else counts[::-1]:
            rates_by[t] += rates(
                lambda t=t: engines[t].search(states), sims * args.roots, 1, time.perf_counter
            )
    one = statistics.median(rates_by[counts[0]])
    lines = []
    for t in counts:
        median = statistics.median(rates_by[t])
        ratio = median / one
        target = 0.8 * t / counts[0]
        lines.append([
            str(t),
            str(usable_threads(t)),
            f"{median:,.0f}",
            f"{min(rates_by[t]):,.0f}-{max(rates_by[t]):,.0f}",
            f"{ratio:.2f}x",
            f">= {target:.1f}x: {'met' if ratio >= target else 'MISSED'}" if t > counts[0] else "(baseline)",
        ])  # fmt: skip
    print(f"\nsimulations/s with {args.roots} roots, wall time, median (min-max) of {args.repeats} repeats\n")
    print_table(
        ["threads=", "threads used", "median sims/s", "min-max", f"x {counts[0]} thread(s)", "target 0.8 N"],
        lines,
    )
    print(
        f"  (baseline: {counts[0]} thread(s), {one:,.0f} sims/s, measured in this run; threads beyond"
        f" numba's pool ({usable_threads(0)}) run on the pool)"
    )
    best = max(statistics.median(v) for v in rates_by.values())
    if size == 15 and usable_threads(0) >= 16:
        met = "met" if best >= 1e6 else "MISSED"
        print(f"  [{met}] >= 1,000,000 simulations/s tree only on 15x15 with 16+ cores: {best:,.0f}")


# -- section 2: with a network ---------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per side")
    parser.add_argument("--sims", type=int, default=800, help="simulations per search, from a fresh tree")
    parser.add_argument("--board", type=int, default=15, help="board size (5 in a row)")
    parser.add_argument("--clock", choices=list(CLOCKS), default="cpu", help="time with CPU or wall time")
    parser.add_argument(
        "--section",
        choices=["1", "2", "all"],
        default="all",
        help="1: tree alone; 2: with a network",
    )
    parser.add_argument(
        "--batches", help="section 2: batch sizes, comma-separated (default 8,32 on a CPU, 8,64,256 on a GPU)"
    )
    parser.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="section 2's network (auto: cuda if any)",
    )
    parser.add_argument(
        "--threads", help="section 1: tree threads side by side, comma-separated (default 1, 2, 4, ... CPUs)"
    )
    parser.add_argument("--roots", type=int, default=256, help="section 1: roots of the threads' call")
    parser.add_argument(
        "--net-threads", help="section 2: threads= side by side, comma-separated (default 1 and the CPUs)"
    )
    parser.add_argument(
        "--groups", help="section 2: search.pipeline_groups side by side (default 1 on a CPU, 1,2 on a GPU)"
    )
    parser.add_argument(
        "--backends",
        default="torch",
        help="section 2: search.inference.backend side by side (torch, torch_half, onnxruntime)",
    )
    parser.add_argument("--blocks", type=int, default=1, help="section 2: residual blocks of the network")
    parser.add_argument("--net-sims", type=int, default=200, help="section 2: simulations a move")
    parser.add_argument("--net-steps", type=int, default=1, help="section 2: runner steps a timed repeat")
    parser.add_argument(
        "--mallopt",
        action="store_true",
        help="section 2: have malloc keep freed memory (no page faults in torch's CPU calls; a diagnostic)",
    )
    parser.add_argument(
        "--net-clock",
        choices=list(CLOCKS),
        default="wall",
        help="section 2: wall time, or this process's CPU time (CPU only: steadier on a busy machine)",
    )
    args = parser.parse_args()

    print_machine()
    if args.section in ("1", "all"):
        tree_section(args)
    if args.section in ("2", "all"):
        network_section(args)


if __name__ == "__main__":
    main()
