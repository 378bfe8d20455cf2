"""Batched, pipelined search on Ray (`search=ray_async`) beside the in-process searches and the
network's own batched forward rate, over a `batch_size` x `max_wait_ms` grid, in one run.

The network is the gomoku_9x9 preset's (a PolicyValueNet of `--blocks` 3 residual blocks of
`--channels` 32 on a `--board` 9 board, random weights: speed does not depend on them), one torch
thread per process, on `--device` (auto: cuda when available). Every side is built and warmed up
first (a move in every game: compiling, starting actors); then `--repeats` rounds measure every
side in turn, each over `--steps` self-play moves in every game, in wall time, so that a slow
spell of a shared machine falls on all sides of a round alike. The ratios are medians over the
rounds of each round's own ratio (to that round's ceiling and vectorize row); the rates are
medians too. Rows:

- forward B: the network's positions/s on B realistic positions, called over and over in this
  process, by each backend of `--backends` (eager torch, ONNX Runtime: search.inference.backend):
  the in-process ceiling is torch's best of these over the grid's batch sizes;
- sequential: one game at a time (SelfPlayRunner over search=sequential): one leaf per network call;
- vectorize: `--games` games at once in this process (VectorizeRunner over search=sequential): one
  leaf per game per network call, as agent=alphazero plays by default;
- ray_async bs=B wait=W: the same VectorizeRunner over search=ray_async, its network in `--actors`
  Ray inference actor(s) (1 CPU each, or a share of the GPU), batches of B leaves sent when full or
  after W ms, `--inflight` batches in flight, `--inflight-limit` batches' worth of leaves waiting
  at most; also its batch fill, mean batches in flight and the actor's time per batch;
- with `--workers N`: self-play in N Ray workers of `--games` games each, sharing the actor(s)
  (search.workers=N), measured over `--seconds` of the run's RayAsyncRunner.

The inference actors keep freed memory (glibc's mallopt: without it, every CPU forward of batch
128 page-faults its activations in again); so does this process, so that the in-process rows have
the same advantage.

Every in-process row and grid cell is measured with each backend, side by side; the ratios are to
torch's rows of the same round. Simulations/s counts every simulation (a leaf evaluated or one
whose value was known). Targets: the best ray_async cell >= 0.8x the in-process ceiling on a CPU;
on a GPU, self-play with N workers >= 5x the single-process vectorize row.

    python benchmarks/mcts_batching.py [--batches 8,32,128] [--waits 1,5,20] [--games 32] [--sims 100]
        [--steps 3] [--repeats 3] [--inflight 2] [--actors 1] [--workers 0] [--device auto|cpu|cuda]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mcts_speed import realistic_planes

CPU_TARGET = 0.8
GPU_TARGET = 5.0


@dataclass
class Row:
    name: str
    rates: list[float] = field(default_factory=list)
    x_ceiling: list[float] = field(default_factory=list)
    x_vector: list[float] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return _median(self.rates)

    def ratios(self, ceiling: float, vector: float) -> None:
        """This round's ratios, from its last rate."""
        self.x_ceiling.append(self.rates[-1] / ceiling)
        self.x_vector.append(self.rates[-1] / vector)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def forward_rate(evaluator: Any, planes: np.ndarray, seconds: float) -> float:
    evaluator(planes)
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        evaluator(planes)
        n += len(planes)
    return n / (time.perf_counter() - started)


def runner_rate(runner: Any, engine: Any, steps: int) -> float:
    """Simulations/s over `steps` runner steps."""
    sims, started = engine.simulations, time.perf_counter()
    for _ in range(steps):
        runner.step()
    return (engine.simulations - sims) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", default="8,32,128", help="batch_size values of the grid")
    parser.add_argument("--waits", default="1,5,20", help="max_wait_ms values of the grid")
    parser.add_argument("--games", type=int, default=32, help="games played at once (agent.parallel_games)")
    parser.add_argument("--sims", type=int, default=100, help="simulations per move (search.num_simulations)")
    parser.add_argument(
        "--steps", type=int, default=3, help="self-play moves (in every game) per measurement"
    )
    parser.add_argument("--repeats", type=int, default=3, help="measurements per row (median)")
    parser.add_argument("--inflight", type=int, default=2, help="search.max_inflight_batches")
    parser.add_argument(
        "--inflight-limit",
        type=int,
        default=4,
        help="search.async_inflight_limit (0: null, one batch per root)",
    )
    parser.add_argument(
        "--actors", type=int, default=1, help="search.inference_actors of every ray_async side"
    )
    parser.add_argument("--workers", type=int, default=0, help="also measure N self-play workers")
    parser.add_argument("--seconds", type=float, default=20.0, help="time of the workers' measurement")
    parser.add_argument("--board", type=int, default=9)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--backends",
        default="torch,onnxruntime",
        help="inference backends measured side by side (search.inference.backend); the first of "
        "torch or the first given is the reference of the ratios",
    )
    parser.add_argument(
        "--num-cpus",
        type=int,
        default=None,
        help="logical CPUs of the local Ray (default: enough for the grid)",
    )
    args = parser.parse_args()

    import ray
    import torch

    from framework import ray_runtime
    from framework_plugins.alphazero.network import PolicyValueNet, evaluator_for
    from framework_plugins.alphazero.selfplay import (
        MoveChoice,
        SelfPlayRunner,
        VectorizeRunner,
        vectorize_runner,
    )
    from framework_plugins.gomoku.rules import Gomoku
    from framework_plugins.mcts.config import InferenceConfig, RayAsyncConfig, SequentialConfig
    from framework_plugins.mcts.engines import RayAsyncSearch, local_search
    from framework_plugins.mcts.service import BEST, RayInference

    torch.set_num_threads(1)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    batches = [int(b) for b in args.batches.split(",")]
    waits = [float(w) for w in args.waits.split(",")]
    backends = args.backends.split(",")
    game = Gomoku(args.board, 5)
    torch.manual_seed(0)
    net = PolicyValueNet(
        board_size=args.board, in_planes=game.n_planes, blocks=args.blocks, channels=args.channels
    )
    net.to(device).eval()
    evaluators = {b: evaluator_for(net, device, b) for b in backends}
    choice = MoveChoice(1.0, 8)
    print(
        f"machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python "
        f"{platform.python_version()}, torch {torch.__version__}, ray {ray.__version__}, device {device}"
    )
    print(
        f"network: {args.blocks} blocks x {args.channels} channels on {args.board}x{args.board}; "
        f"{args.games} games x {args.sims} simulations a move; {args.steps} moves per measurement, "
        f"median of {args.repeats}; backends {', '.join(backends)}"
    )
    from framework_plugins.mcts.inference import keep_freed_memory

    print(f"malloc: freed memory kept, here as in the inference actors: {keep_freed_memory()}")
    cells_n = len(batches) * len(waits) * len(backends)
    started = time.perf_counter()
    # A logical CPU per actor: the grid's actors stay up (idle but one) for the whole run.
    ray_runtime.start_local(
        ray, num_cpus=args.num_cpus or max(os.cpu_count() or 1, (cells_n + 1) * args.actors + 1)
    )
    print(f"local Ray started in {time.perf_counter() - started:.1f} s")

    def seq_search(backend: str, seed: int) -> Any:
        evaluator = evaluators[backend]
        cfg = SequentialConfig(num_simulations=args.sims)
        return local_search(cfg, game=game, evaluator_factory=lambda: evaluator, seed=seed)

    def async_config(batch_size: int, max_wait_ms: float, backend: str, **more: Any) -> RayAsyncConfig:
        return RayAsyncConfig(
            num_simulations=args.sims,
            batch_size=batch_size,
            max_wait_ms=max_wait_ms,
            max_inflight_batches=args.inflight,
            async_inflight_limit=args.inflight_limit or None,
            inference_actors=args.actors,
            # Only one side's actors run at a time: on a GPU, they share it.
            inference_num_gpus=1.0 / (cells_n * args.actors) if device == "cuda" else 0.0,
            inference=InferenceConfig(backend=backend),
            **more,
        )

    def async_search(cfg: RayAsyncConfig, seed: int) -> tuple[Any, RayInference]:
        # The service publishes the network's weights; each actor computes it by cfg's backend.
        inference = RayInference.start(cfg, lambda: evaluator_for(net, device))
        services.append(inference)
        return RayAsyncSearch(cfg).make(game=game, inference=inference, model=BEST, seed=seed), inference

    rng = np.random.default_rng(0)
    planes = {b: realistic_planes(game, b, rng, max_moves=game.n_actions // 3 - 1) for b in batches}
    reference = backends[0] if "torch" not in backends else "torch"
    forward = {(k, b): Row(f"forward B={b} {k} (pos/s)") for k in backends for b in batches}
    single = {k: Row(f"sequential, 1 game, {k}") for k in backends}
    vector = {k: Row(f"vectorize, {args.games} games, {k}") for k in backends}
    cells = {
        (k, b, w): Row(f"ray_async bs={b} wait={w:g}ms {k}") for k in backends for b in batches for w in waits
    }
    sides: list[tuple[Row, Any, Any, int]] = []  # (row, runner, search, steps)
    searches: dict[Any, Any] = {}
    services: list[RayInference] = []
    try:
        for k in backends:
            search = seq_search(k, 1)
            sides.append(
                (
                    single[k],
                    SelfPlayRunner(game, search, choice, np.random.default_rng(1), noise=True),
                    search,
                    4,
                )
            )
            search = seq_search(k, 2)
            runner: Any = VectorizeRunner(
                game, search, choice, np.random.default_rng(2), n_games=args.games, noise=True
            )
            sides.append((vector[k], runner, search, 1))
        for (k, b, w), row in cells.items():
            search, _ = async_search(async_config(b, w, k), 3)
            searches[(k, b, w)] = search
            runner = VectorizeRunner(
                game, search, choice, np.random.default_rng(3), n_games=args.games, noise=True
            )
            sides.append((row, runner, search, 1))
        print(f"warming up {len(sides)} sides ...", flush=True)
        for _, runner, search, _ in sides:
            runner.step()
            search.perf_metrics()
        for r in range(args.repeats):
            for (k, b), row in forward.items():
                row.rates.append(forward_rate(evaluators[k], planes[b], seconds=2.0))
            for row, runner, search, steps in sides:
                row.rates.append(runner_rate(runner, search, args.steps * steps))
            ceiling_r = max(row.rates[-1] for (k, _), row in forward.items() if k == reference)
            for row in [*forward.values(), *(side[0] for side in sides)]:
                row.ratios(ceiling_r, vector[reference].rates[-1])
            best_r = max(cells.values(), key=lambda row: row.rates[-1])
            print(
                f"  round {r + 1}/{args.repeats}: {reference} ceiling {ceiling_r:,.0f} pos/s, "
                + ", ".join(f"vectorize {k} {vector[k].rates[-1]:,.0f}" for k in backends)
                + f", best ray_async {best_r.name} {best_r.rates[-1]:,.0f} sims/s",
                flush=True,
            )
        for key, row in cells.items():
            metrics = searches[key].perf_metrics()
            row.extra = {
                "fill": metrics.get("perf/batch_fill", float("nan")),
                "inflight": metrics.get("perf/inflight_mean", float("nan")),
                "actor ms": metrics.get("perf/inference_ms", float("nan")),
            }
    finally:
        for service in services:
            service.close()
        services.clear()
    rows = [*forward.values(), *single.values(), *vector.values(), *cells.values()]
    top_b = max(batches, key=lambda b: forward[(reference, b)].median)

    workers_row = None
    if args.workers:
        best_k, best_b, best_w = max(cells, key=lambda key: _median(cells[key].x_ceiling))
        cfg = async_config(best_b, best_w, best_k, workers=args.workers)
        _, inference = async_search(cfg, 4)
        make = functools.partial(vectorize_runner, game=game, choice=choice, n_games=args.games, noise=True)
        source = RayAsyncSearch(cfg).self_play(inference, make, game=game, seed=4, should_stop=lambda: False)
        assert source is not None
        vector_side = next(side for side in sides if side[0] is vector[reference])
        try:
            for _ in range(args.workers * 2):
                source.step()
            workers_row = Row(
                f"ray_async, {args.workers} workers x {args.games} games "
                f"(bs={best_b} wait={best_w:g}ms {best_k})"
            )
            for _ in range(args.repeats):
                # The in-process rows again, beside it (the workers wait while their results are unread).
                ceiling_r = forward_rate(evaluators[reference], planes[top_b], seconds=2.0)
                vector_r = runner_rate(vector_side[1], vector_side[2], args.steps)
                sims, t0 = source.simulations, time.perf_counter()
                while time.perf_counter() - t0 < args.seconds / args.repeats:
                    source.step()
                workers_row.rates.append((source.simulations - sims) / (time.perf_counter() - t0))
                workers_row.ratios(ceiling_r, vector_r)
            rows.append(workers_row)
        finally:
            source.close()
            inference.close()

    print()
    header = [
        "side",
        "sims/s (pos/s)",
        f"x {reference} ceiling",
        f"x {reference} vectorize",
        "fill",
        "in flight",
        "actor ms",
    ]
    lines = []
    for row in rows:
        lines.append(
            [
                row.name,
                f"{row.median:,.0f}",
                f"{_median(row.x_ceiling):.2f}x",
                f"{_median(row.x_vector):.2f}x",
                *(f"{row.extra[k]:.2f}" if k in row.extra else "" for k in ("fill", "inflight", "actor ms")),
            ]
        )
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        cells_txt = [
            line[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)),
        ]
        print("| " + " | ".join(cells_txt) + " |")

    for k in backends:
        print(f"\nsims/s of ray_async, {k}, over the grid (rows: batch_size, columns: max_wait_ms):")
        print("bs \\ wait " + "".join(f"{w:>10g}" for w in waits))
        for b in batches:
            print(f"{b:>9} " + "".join(f"{cells[(k, b, w)].median:>10,.0f}" for w in waits))
    best = max(cells, key=lambda key: _median(cells[key].x_ceiling))
    ratio = _median(cells[best].x_ceiling)
    print(
        f"\nbest cell {cells[best].name}: {cells[best].median:,.0f} sims/s = {ratio:.2f}x the {reference} "
        f"in-process ceiling (the best {reference} forward of each round; median forward B={top_b} "
        f"{forward[(reference, top_b)].median:,.0f} pos/s), "
        f"{_median(cells[best].x_vector):.2f}x {reference} vectorize (medians of the rounds' ratios)"
    )
    for k in backends:
        print(f"vectorize {k}: {_median(vector[k].x_vector):.2f}x {reference} vectorize (same run)")
    if device == "cpu":
        print(f"target (CPU): >= {CPU_TARGET}x the ceiling: {'met' if ratio >= CPU_TARGET else 'NOT met'}")
    if workers_row is not None:
        gain = _median(workers_row.x_vector)
        print(f"{args.workers} workers: {gain:.2f}x the single-process vectorize row", end="")
        print(
            f" (target on a GPU: >= {GPU_TARGET}x: {'met' if gain >= GPU_TARGET else 'NOT met'})"
            if device == "cuda"
            else ""
        )
    ray.shutdown()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
