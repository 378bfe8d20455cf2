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
import copy
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framework.machine import short_openmp_spin

# As `python -m framework` does, before torch is imported: OpenMP's workers spin briefly between
# regions (the network and the tree take turns on the cores).
short_openmp_spin()

N_IN_ROW = 5
C_PUCT = 2.0
FPU = 0.0
N_ROOTS = 8
TARGET = 30.0
NET_TARGET = 0.8
"""Section 2's target: runner simulations/s >= 0.8x the network's forward positions/s at the same batch."""
NET_CHANNELS = 64
DEFAULT_BATCHES = {"cpu": "8,32", "cuda": "8,64,256"}
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}

BLACK, WHITE = 1, -1
ONGOING, WIN, DRAW = 0, 1, 2
DIRECTIONS = ((1, 0), (0, 1), (1, 1), (1, -1))


# -- the reference: a plain-Python AlphaZero MCTS ------------------------------------------------------


class Board:
    """The board as junxiaosong/AlphaZero_Gomoku's game.Board keeps it: {cell: player} and the empty cells.

    Same rules as ours: black (+1) first, freestyle (n_in_row or more wins), checked through the
    last move only; a full board is a draw.
    """

    def __init__(self, size: int, n_in_row: int) -> None:
        self.size = size
        self.n_in_row = n_in_row
        self.states: dict[int, int] = {}
        self.availables = list(range(size * size))
        self.current_player = BLACK
        self.last_move = -1

    def do_move(self, move: int) -> int:
        """Play `move` for the side to move; the outcome (ONGOING, WIN or DRAW)."""
        player = self.current_player
        self.states[move] = player
        self.availables.remove(move)
        self.current_player = -player
        self.last_move = move
        if self.wins(move, player):
            return WIN
        if not self.availables:
            return DRAW
        return ONGOING

    def wins(self, move: int, player: int) -> bool:
        """Whether `player`'s stone at `move` (placed or not) makes a line of n_in_row or more."""
        size, states = self.size, self.states
        x, y = move % size, move // size
        for dx, dy in DIRECTIONS:
            count = 1
            u, v = x + dx, y + dy
            while 0 <= u < size and 0 <= v < size and states.get(v * size + u) == player:
                count += 1
                u, v = u + dx, v + dy
            u, v = x - dx, y - dy
            while 0 <= u < size and 0 <= v < size and states.get(v * size + u) == player:
                count += 1
                u, v = u - dx, v - dy
            if count >= self.n_in_row:
                return True
        return False

    def has_winning_move(self, player: int) -> bool:
        """Whether `player` can win at once: an empty cell next to one of their stones that wins."""
        size, states = self.size, self.states
        for cell, owner in states.items():
            if owner != player:
                continue
            x, y = cell % size, cell // size
            for v in range(max(y - 1, 0), min(y + 2, size)):
                for u in range(max(x - 1, 0), min(x + 2, size)):
                    c = v * size + u
                    if c not in states and self.wins(c, player):
                        return True
        return False


def uniform_policy(board: Board) -> tuple[list[tuple[int, float]], float]:
    """(action, prior) over the empty cells, all equal, and a value of 0 (the projects' rollout-free stub)."""
    p = 1.0 / len(board.availables)
    return [(a, p) for a in board.availables], 0.0


class Node:
    """A search node: children {action: node}, visits N, value sum W (mover-into-node's view), prior P."""

    __slots__ = ("N", "P", "W", "children", "terminal")

    def __init__(self, prior: float) -> None:
        self.children: dict[int, Node] = {}
        self.N = 0
        self.W = 0.0
        self.P = prior
        self.terminal: float | None = None
        """The value of a terminal leaf (mover-into-node's view), once known."""

    def expand(self, priors: list[tuple[int, float]]) -> None:
        self.children = {action: Node(p) for action, p in priors}

    def select(self, c_puct: float, fpu: float) -> tuple[int, Node]:
        """The child with the best PUCT score (the first of equals)."""
        sqrt_n = math.sqrt(self.N)
        best_score = -math.inf
        best: tuple[int, Node] | None = None
        for action, child in self.children.items():
            n = child.N
            q = child.W / n if n else fpu
            score = q + c_puct * child.P * sqrt_n / (1 + n)
            if score > best_score:
                best_score, best = score, (action, child)
        assert best is not None
        return best


class ReferenceMCTS:
    """PUCT search in the style of mcts_alphaZero.py: a fresh tree per search, a board copy per playout."""

    def __init__(
        self,
        num_simulations: int,
        *,
        policy: Callable[[Board], tuple[list[tuple[int, float]], float]] = uniform_policy,
        c_puct: float = C_PUCT,
        fpu: float = FPU,
        detect_wins: bool = True,
    ) -> None:
        self.num_simulations = num_simulations
        self.policy = policy
        self.c_puct = c_puct
        self.fpu = fpu
        self.detect_wins = detect_wins

    def search(self, board: Board) -> list[int]:
        """Visit counts of the root's moves, indexed by action, after num_simulations playouts."""
        root = Node(1.0)
        priors, value = self.policy(board)
        root.expand(priors)
        root.N, root.W = 1, -value
        for _ in range(self.num_simulations):
            self._playout(root, copy.deepcopy(board))
        counts = [0] * (board.size * board.size)
        for action, child in root.children.items():
            counts[action] = child.N
        return counts

    def _playout(self, root: Node, board: Board) -> None:
        node, path, outcome = root, [root], ONGOING
        while node.children:
            action, node = node.select(self.c_puct, self.fpu)
            outcome = board.do_move(action)
            path.append(node)
        if node.terminal is None:
            if outcome == WIN:
                node.terminal = 1.0
            elif outcome == DRAW:
                node.terminal = 0.0
            elif self.detect_wins and board.has_winning_move(board.current_player):
                node.terminal = -1.0  # the player to move wins next: lost for whoever moved here
        if node.terminal is not None:
            value = node.terminal
        else:
            priors, leaf_value = self.policy(board)
            node.expand(priors)
            value = -leaf_value  # the policy's value is the player to move's; nodes hold the mover's
        for visited in reversed(path):
            visited.N += 1
            visited.W += value
            value = -value


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


def reference_board(size: int, moves: Sequence[int]) -> Board:
    board = Board(size, N_IN_ROW)
    for move in moves:
        if board.do_move(move) != ONGOING:
            raise ValueError(f"moves {list(moves)} end the game")
    return board


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
        ours = engine.search([our_state(size, moves)])[0]
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
    ours_all = engine.search([our_state(size, m) for m in openings])
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


def thread_counts(spec: str | None) -> list[int]:
    """--threads as a list (default: 1, 2, 4, ... and this machine's CPU count)."""
    if spec:
        counts = sorted({int(t) for t in spec.split(",")})
        if counts[0] < 1:
            raise SystemExit(f"--threads {spec}: thread counts must be >= 1")
        return counts
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    counts = [1]
    while counts[-1] * 2 < cpus:
        counts.append(counts[-1] * 2)
    return sorted({*counts, cpus})


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
    first = {t: engine.search(states) for t, engine in engines.items()}  # compiling, untimed
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


class TimedEvaluator:
    """An evaluator that adds up the time and the positions of its calls (the runner's network share)."""

    def __init__(
        self, inner: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], clock: Callable[[], float]
    ) -> None:
        self.inner = inner
        self.clock = clock
        self.seconds = 0.0
        self.positions = 0

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t0 = self.clock()
        out = self.inner(planes)
        self.seconds += self.clock() - t0
        self.positions += len(planes)
        return out


@dataclass
class NetResult:
    """Section 2's measurements at one batch size and one configuration: a value per repeat, and
    self-play totals."""

    batch: int
    threads: int = 1
    """The run's threads=: the tree kernels' and torch's."""
    groups: int = 1
    """search.pipeline_groups."""
    backend: str = "torch"
    """search.inference.backend, the forward's and the runner's."""
    forward: list[float] = field(default_factory=list)
    """The network's positions/s."""
    runner: list[float] = field(default_factory=list)
    """The runner's simulations/s."""
    net_share: list[float] = field(default_factory=list)
    """The network's share of the runner's time (its calls' time over wall time; with groups the
    network's calls overlap the walk)."""
    net_rate: list[float] = field(default_factory=list)
    """The network's positions/s inside the runner (its evaluator's positions over its own time)."""
    evals_per_sim: list[float] = field(default_factory=list)
    """Positions evaluated per simulation in the runner (fewer than 1: leaves known without the network)."""
    first_step: float = 0.0
    moves: int = 0
    games: int = 0
    runner_seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.backend} threads={self.threads} groups={self.groups}"


def realistic_planes(game: Any, n: int, rng: np.random.Generator, max_moves: int = 60) -> np.ndarray:
    """The planes [n, C, size, size] of n positions of 0 to max_moves random moves each (no finished game)."""
    out = np.empty((n, game.n_planes, *game.board_shape), dtype=np.float32)
    i = 0
    while i < n:
        state = game.new_state()
        for _ in range(int(rng.integers(0, max_moves + 1))):
            state.play(int(rng.choice(np.flatnonzero(state.legal))))
            if state.done:
                break
        if not state.done:
            out[i] = state.planes()
            i += 1
    return out


def keep_freed_memory() -> str:
    """Ask glibc's malloc to keep freed memory (up to 32 MiB blocks from its heap, no trimming), as
    the inference actors of search=ray_async do.

    Without it, torch's CPU activations (MiBs a call) are mmapped and given back on every call, and
    the next call page-faults them in again (thousands of faults, a third of a call's CPU time here).
    """
    from framework_plugins.mcts.inference import keep_freed_memory as keep

    if not keep():
        return "--mallopt: not glibc, or mallopt refused; left as is"
    return "malloc: mallopt(M_MMAP_THRESHOLD=32 MiB, M_TRIM_THRESHOLD=1 GiB) (--mallopt)"


def pick_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    return name


def measure_batch(
    net: Any,
    game: Any,
    device: str,
    batch: int,
    args: argparse.Namespace,
    backend: str = "torch",
    *,
    threads: int = 1,
    groups: int = 1,
) -> NetResult:
    """Forward rate and runner rate at one batch size, interleaved (in alternating order) repeat by
    repeat, with `threads` torch and tree threads and `groups` pipeline groups."""
    import torch

    from framework_plugins.alphazero.config import AlphaZeroConfig
    from framework_plugins.alphazero.network import evaluator_for
    from framework_plugins.alphazero.selfplay import MoveChoice, VectorizeRunner
    from framework_plugins.mcts.config import SequentialConfig
    from framework_plugins.mcts.engines import local_search

    torch.set_num_threads(threads)
    result = NetResult(batch, threads, groups, backend)
    agent = AlphaZeroConfig()
    forward = evaluator_for(net, device, backend)
    planes = realistic_planes(game, batch, np.random.default_rng(batch))
    clock = CLOCKS[args.net_clock]
    timed = TimedEvaluator(evaluator_for(net, device, backend), clock)
    engine = local_search(
        SequentialConfig(num_simulations=args.net_sims, pipeline_groups=groups),
        game=game,
        evaluator_factory=lambda: timed,
        seed=0,
        threads=threads,
        device=device,
    )
    runner = VectorizeRunner(
        game,
        engine,
        MoveChoice(agent.temperature, agent.temperature_moves),
        np.random.default_rng(0),
        n_games=batch,
        noise=agent.noise,
    )
    t0 = time.perf_counter()
    runner.step()  # untimed: compiling the kernels for these types, and the empty board's first search
    result.first_step = time.perf_counter() - t0
    for _ in range(3):
        forward(planes)  # untimed: the network's first calls at this batch size
    span = result.first_step

    def run_forward() -> None:
        calls, t0 = 0, clock()
        while True:
            forward(planes)
            calls += 1
            elapsed = clock() - t0
            if calls >= 5 and elapsed >= min(max(span, 0.5), 5.0):
                break
        result.forward.append(batch * calls / elapsed)

    def run_runner() -> None:
        nonlocal span
        sims, seconds, positions = engine.simulations, timed.seconds, timed.positions
        t0 = clock()
        for _ in range(args.net_steps):
            moves, finished = runner.step()
            result.moves += moves
            result.games += len(finished)
        span = clock() - t0
        sims = engine.simulations - sims
        result.runner_seconds += span
        result.runner.append(sims / span)
        result.net_share.append((timed.seconds - seconds) / span)
        result.net_rate.append((timed.positions - positions) / (timed.seconds - seconds))
        result.evals_per_sim.append((timed.positions - positions) / sims)

    try:
        for r in range(args.repeats):
            for run in (run_runner, run_forward) if r % 2 == 0 else (run_forward, run_runner):
                run()
    finally:
        engine.close()
    ratio = statistics.median(result.runner) / statistics.median(result.forward)
    print(
        f"  B={batch}, {result.label}: forward {statistics.median(result.forward):,.0f}"
        f" positions/s, runner {statistics.median(result.runner):,.0f} sims/s ({ratio:.2f}x); first step"
        f" {result.first_step:.2f} s",
        flush=True,
    )
    return result


def configurations(args: argparse.Namespace, device: str) -> list[tuple[int, int]]:
    """Section 2's (threads, groups) side by side: --net-threads x --groups (defaults: 1 and this
    machine's CPUs; 1 group on a CPU, 1 and 2 on a GPU)."""
    cpus = thread_counts(None)[-1]
    threads = sorted({int(t) for t in (args.net_threads or f"1,{cpus}").split(",")})
    groups = sorted({int(g) for g in (args.groups or ("1,2" if device == "cuda" else "1")).split(",")})
    if threads[0] < 1 or groups[0] < 1:
        raise SystemExit("--net-threads and --groups must be >= 1")
    return [(t, g) for t in threads for g in groups]


def network_section(args: argparse.Namespace) -> None:
    """Section 2: self-play's simulations/s beside the same network's batched forward rate."""
    import torch

    from framework_plugins.alphazero.network import PolicyValueNet
    from framework_plugins.gomoku.rules import Gomoku

    device = pick_device(args.device)
    malloc = keep_freed_memory() if args.mallopt else "malloc: as is (glibc's defaults)"
    batches = [int(b) for b in (args.batches or DEFAULT_BATCHES[device]).split(",")]
    if min(batches) < 1 or args.repeats < 1 or args.net_steps < 1:
        raise SystemExit("--batches, --repeats and --net-steps must be >= 1")
    if device == "cuda" and args.net_clock == "cpu":
        raise SystemExit("--net-clock cpu on a GPU would leave out the time the CPU waits for it: use wall")
    configs = configurations(args, device)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    known = ("torch", "torch_half", "onnxruntime")
    if not backends or any(b not in known for b in backends):
        raise SystemExit(f"--backends {args.backends!r}: each one of {', '.join(known)}")
    game = Gomoku(args.board, N_IN_ROW)
    torch.manual_seed(0)
    net = PolicyValueNet(
        board_size=args.board, in_planes=game.n_planes, blocks=args.blocks, channels=NET_CHANNELS
    )
    net.to(device).eval()
    n_params = sum(p.numel() for p in net.parameters())
    gpu = f" ({torch.cuda.get_device_name()})" if device == "cuda" else ""
    print(
        f"\n== section 2: with a network: {args.board}x{args.board}, {N_IN_ROW} in a row; self-play's"
        f" simulations/s beside the network's forward positions/s at the same batch; target"
        f" >= {NET_TARGET}x ==\n"
        f"network: PolicyValueNet, a 3x3 stem + {args.blocks} residual block(s) ="
        f" {1 + 2 * args.blocks} 3x3 convolutions of {NET_CHANNELS} channels, then 1x1 policy/value heads"
        f" ({2 + 2 * args.blocks} convolutions deep, {n_params:,} parameters); weights float32 (each"
        f" backend runs them its way), inference mode,"
        f" device {device}{gpu}, torch {torch.__version__}; {malloc}\n"
        f"runner: VectorizeRunner of B games over search=sequential, {args.net_sims} simulations a move"
        f" (subtree reuse), {args.net_steps} step(s) a repeat; {args.repeats} repeats, {args.net_clock} time;"
        f" configurations (threads= of torch and the tree kernels, search.pipeline_groups):"
        f" {', '.join(f'{t}x{g}' for t, g in configs)}; backends {', '.join(backends)}",
        flush=True,
    )
    results = [
        measure_batch(net, game, device, batch, args, backend, threads=t, groups=g)
        for batch in batches
        for backend in backends
        for t, g in configs
    ]
    best = {
        b: max((r for r in results if r.batch == b), key=lambda r: statistics.median(r.runner))
        for b in batches
    }

    print(
        f"\nmedians of {args.repeats} interleaved repeats (min-max), {args.net_clock} time, device {device}\n"
    )
    header = [
        "batch",
        "backend",
        "threads, groups",
        "forward pos/s",
        "runner sims/s",
        "runner/forward",
        f">= {NET_TARGET}x",
        "x best in-process",
        "net share",
        "net pos/s in runner",
        "evals/sim",
        "moves/s",
        "games/s",
    ]
    lines = []
    for res in results:
        fwd, run = statistics.median(res.forward), statistics.median(res.runner)
        games = f"{res.games / res.runner_seconds:.2f}" if res.games else f"none in {res.moves} moves"
        lines.append([
            str(res.batch),
            res.backend,
            f"{res.threads}, {res.groups}",
            f"{fwd:,.0f} ({min(res.forward):,.0f}-{max(res.forward):,.0f})",
            f"{run:,.0f} ({min(res.runner):,.0f}-{max(res.runner):,.0f})",
            f"{run / fwd:.2f}x",
            "PASS" if run / fwd >= NET_TARGET else "FAIL",
            f"{run / statistics.median(best[res.batch].runner):.2f}x",
            f"{statistics.median(res.net_share):.0%}",
            f"{statistics.median(res.net_rate):,.0f}",
            f"{statistics.median(res.evals_per_sim):.3f}",
            f"{res.moves / res.runner_seconds:.1f}",
            games,
        ])  # fmt: skip
    print_table(header, lines)
    print(
        f"  (runner/forward: the runner's simulations/s over the network's positions/s at the same B and"
        f" threads; x best in-process: over the fastest configuration of the same B in this run; net"
        f" share: the part of the runner's wall time a network call was under way (with groups it"
        f" overlaps the walk), net pos/s in runner the evaluator's own rate there; evals/sim: positions"
        f" evaluated per simulation (terminal and won-at-once leaves need none); moves/s and games/s:"
        f" {args.board}x{args.board} self-play moves and finished games per second of runner time, all B"
        f" games together)"
    )
    for b, res in best.items():
        ratio = statistics.median(res.runner) / statistics.median(res.forward)
        met = "met" if ratio >= NET_TARGET else "MISSED"
        first = (backends[0], *configs[0])
        one = next(r for r in results if r.batch == b and (r.backend, r.threads, r.groups) == first)
        gain = statistics.median(res.runner) / statistics.median(one.runner)
        print(
            f"  [{met}] B={b}: runner >= {NET_TARGET}x forward: {ratio:.2f}x ({res.label}, the fastest;"
            f" {gain:.2f}x {one.label}'s {statistics.median(one.runner):,.0f} sims/s)"
        )


def print_table(header: list[str], lines: list[list[str]]) -> None:
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        cells = [line[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True))]
        print("| " + " | ".join(cells) + " |")


def print_machine() -> None:
    import numba

    print(
        f"machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python"
        f" {platform.python_version()}, numba {numba.__version__}, numpy {np.__version__}, {sys.platform}"
    )


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
