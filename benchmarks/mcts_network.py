"""Section 2 of benchmarks/mcts_speed.py: self-play with a network beside the network's own batched
forward rate, per backend, batch size, thread count and pipeline groups (the module docstring of
mcts_speed.py says what is measured and how)."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mcts_reference import N_IN_ROW
from tables import CLOCKS, print_table, thread_counts

NET_TARGET = 0.8
"""Runner simulations/s >= 0.8x the network's forward positions/s at the same batch."""
NET_CHANNELS = 64
DEFAULT_BATCHES = {"cpu": "8,32", "cuda": "8,64,256"}


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
