"""Batched, pipelined search on Ray (`search=ray_async`) beside the in-process searches and the
network's own batched forward rate, over a `batch_size` x `max_wait_ms` grid, in one run.

The network is the gomoku_9x9 preset's (a PolicyValueNet of `--blocks` 3 residual blocks of
`--channels` 32 on a `--board` 9 board, random weights: speed does not depend on them), one torch
thread per process, on `--device` (auto: cuda when available). Every side is built and warmed up
first (a move in every game: compiling, starting actors); then `--repeats` rounds measure every
side in turn, each over `--steps` self-play moves in every game, in wall time, so that a slow
spell of a shared machine falls on all sides of a round alike, and nothing else runs while a side
is measured. The ratios are medians over the rounds of each round's own ratio; the rates are
medians too. Rows:

- forward B: the network's positions/s on B realistic positions, called over and over in this
  process, by each backend of `--backends` (eager torch, ONNX Runtime: search.inference.backend):
  the in-process ceiling is the best of these over the grid's batch sizes;
- sequential: one game at a time (SelfPlayRunner over search=sequential): one leaf per network call;
- vectorize: `--games` games at once in this process (VectorizeRunner over search=sequential): one
  leaf per game per network call, as agent=alphazero plays by default, on 1 thread and on
  `--threads` (the tree kernels' and torch's threads), in 1 and (on a GPU) 2 pipeline groups;
- ray_async bs=B wait=W: the same VectorizeRunner over search=ray_async, its network in `--actors`
  Ray inference actor(s) (1 CPU each, or a share of the GPU), batches of B leaves sent when full or
  after W ms, `--inflight` batches in flight, `--inflight-limit` batches' worth of leaves waiting
  at most; also its batch fill, mean batches in flight and the actor's time per batch;
- with `--workers N`: self-play in N Ray workers of `--games` games each, sharing the actor(s)
  (agent.workers=N), measured over `--seconds` of the run's RayAsyncRunner, beside the best
  in-process configuration measured again just before the workers start (nothing else running:
  first it waits, `--grace` at most, until the machine's other processes use under half a core,
  as Ray's freshly started idle workers import for seconds). The verdict is against the higher of
  that figure and the configuration's median in the rounds: the best it was seen to do.

Every ratio is to the best in-process self-play configuration of the same round (the fastest of
the sequential and vectorize rows), whose own rate is printed beside it: no row is compared with a
configuration this run did not find to be the best it has. Each measurement ends within its time:
a worker measurement that waits past `--seconds` + `--grace` for its workers says so and what it
was waiting for, and the run goes on.

The inference actors keep freed memory (glibc's mallopt: without it, every CPU forward of batch
128 page-faults its activations in again); so does this process, so that the in-process rows have
the same advantage. Simulations/s counts every simulation (a leaf evaluated or one whose value was
known). Targets: the best ray_async cell >= 0.8x the in-process ceiling on a CPU; N workers >= 0.8x
the best in-process configuration of the same machine.

    python benchmarks/mcts_batching.py [--batches 8,32,128] [--waits 1,5,20] [--games 32] [--sims 100]
        [--steps 3] [--repeats 3] [--inflight 2] [--actors 1] [--workers 0] [--threads N]
        [--device auto|cpu|cuda]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import time
from typing import Any

import numpy as np
from mcts_network import realistic_planes
from selfplay_rows import Row, Side, forward_rate, median_of, median_ratio, workers_rows
from tables import print_table

CPU_TARGET = 0.8


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
    parser.add_argument(
        "--grace", type=float, default=120.0, help="how long past its time a worker measurement may wait"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="in-process rows also on N threads (the tree's and torch's)"
    )
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

    from framework_plugins.alphazero.network import PolicyValueNet, evaluator_for
    from framework_plugins.alphazero.selfplay import (
        MoveChoice,
        SelfPlayRunner,
        VectorizeRunner,
        vectorize_runner,
    )
    from framework_plugins.alphazero.workers import RayAsyncRunner, WorkerSettings
    from framework_plugins.boardgames import BEST
    from framework_plugins.gomoku.rules import Gomoku
    from framework_plugins.mcts.config import InferenceConfig, RayAsyncConfig, SequentialConfig
    from framework_plugins.mcts.engines import RayAsyncSearch, local_search
    from framework_plugins.mcts.service import RayInference
    from framework_plugins.ray_runtime import runtime as ray_runtime

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
    threads = [1] if args.threads <= 1 else [1, args.threads]
    evaluators = {}
    for t in threads:  # ONNX Runtime takes torch's thread count when it is built
        torch.set_num_threads(t)
        evaluators.update({(b, t): evaluator_for(net, device, b) for b in backends})
    torch.set_num_threads(1)
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

    groups = [1, 2] if device == "cuda" else [1]

    def seq_search(backend: str, seed: int, threads: int = 1, groups: int = 1) -> Any:
        evaluator = evaluators[(backend, threads)]
        cfg = SequentialConfig(num_simulations=args.sims, pipeline_groups=groups)
        return local_search(
            cfg, game=game, evaluator_factory=lambda: evaluator, seed=seed, threads=threads, device=device
        )

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

    def make_workers(cfg: RayAsyncConfig, inference: RayInference, should_stop: Any) -> Any:
        make = functools.partial(vectorize_runner, game=game, choice=choice, n_games=args.games, noise=True)
        settings = WorkerSettings(args.workers, max_restarts=cfg.max_restarts)
        plugin = RayAsyncSearch(cfg)
        return RayAsyncRunner(
            settings, inference, make, plugin=plugin, game=game, seed=4, should_stop=should_stop
        )

    rng = np.random.default_rng(0)
    planes = {b: realistic_planes(game, b, rng, max_moves=game.n_actions // 3 - 1) for b in batches}
    forward = {
        (k, b, t): Row(f"forward B={b} {k}" + (f" threads={t}" if len(threads) > 1 else "") + " (pos/s)")
        for k in backends
        for b in batches
        for t in threads
    }
    in_process: list[Side] = []
    cells = {
        (k, b, w): Row(f"ray_async bs={b} wait={w:g}ms {k}") for k in backends for b in batches for w in waits
    }
    sides: list[Side] = []
    searches: dict[Any, Any] = {}
    services: list[RayInference] = []
    try:
        for k in backends:
            search = seq_search(k, 1)
            runner: Any = SelfPlayRunner(game, search, choice, np.random.default_rng(1), noise=True)
            in_process.append(Side(Row(f"sequential, 1 game, {k}"), runner, search, 4))
            for t in threads:
                for g in groups:
                    search = seq_search(k, 2, threads=t, groups=g)
                    runner = VectorizeRunner(
                        game, search, choice, np.random.default_rng(2), n_games=args.games, noise=True
                    )
                    name = f"vectorize, {args.games} games, {k}, threads={t} groups={g}"
                    in_process.append(Side(Row(name), runner, search, 1, t))
        sides += in_process
        for (k, b, w), row in cells.items():
            search, _ = async_search(async_config(b, w, k), 3)
            searches[(k, b, w)] = search
            runner = VectorizeRunner(
                game, search, choice, np.random.default_rng(3), n_games=args.games, noise=True
            )
            sides.append(Side(row, runner, search, 1))
        print(f"warming up {len(sides)} sides ...", flush=True)
        for side in sides:
            side.measure(1)
            side.search.perf_metrics()
        for r in range(args.repeats):
            for (k, b, t), row in forward.items():
                torch.set_num_threads(t)
                row.rates.append(forward_rate(evaluators[(k, t)], planes[b], seconds=1.0))
            torch.set_num_threads(1)
            for side in sides:
                side.row.rates.append(side.measure(args.steps))
            ceiling_r = max(row.rates[-1] for row in forward.values())
            best_r = max(side.row.rates[-1] for side in in_process)
            for row in [*forward.values(), *(side.row for side in sides)]:
                row.ratios(ceiling_r, best_r)
            best_in = max(in_process, key=lambda side: side.row.rates[-1]).row
            best_cell = max(cells.values(), key=lambda row: row.rates[-1])
            print(
                f"  round {r + 1}/{args.repeats}: ceiling {ceiling_r:,.0f} pos/s, best in-process"
                f" {best_in.name} {best_r:,.0f} sims/s, best ray_async {best_cell.name}"
                f" {best_cell.rates[-1]:,.0f} sims/s",
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
    rows = [*forward.values(), *(side.row for side in sides)]
    best_side = max(in_process, key=lambda side: side.row.median)
    top = max(forward.values(), key=lambda row: row.median)

    if args.workers:
        best_k, best_b, best_w = max(cells, key=lambda key: median_of(cells[key].x_ceiling))
        rows += workers_rows(
            args, best_side, (best_k, best_b, best_w), async_config, async_search, make_workers
        )

    print()
    header = ["side", "sims/s (pos/s)", "x ceiling", "x best in-process", "fill", "in flight", "actor ms"]
    lines = []
    for row in rows:
        lines.append(
            [
                row.name,
                f"{row.median:,.0f}",
                median_ratio(row.x_ceiling),
                median_ratio(row.x_best),
                *(f"{row.extra[k]:.2f}" if k in row.extra else "" for k in ("fill", "inflight", "actor ms")),
            ]
        )
    print_table(header, lines)
    print(
        f"  (x ceiling: over each round's fastest forward, median {top.name} {top.median:,.0f};"
        f" x best in-process: over each round's fastest in-process self-play, median"
        f" {best_side.row.name} {best_side.row.median:,.0f} sims/s)"
    )

    for k in backends:
        print(f"\nsims/s of ray_async, {k}, over the grid (rows: batch_size, columns: max_wait_ms):")
        print("bs \\ wait " + "".join(f"{w:>10g}" for w in waits))
        for b in batches:
            print(f"{b:>9} " + "".join(f"{cells[(k, b, w)].median:>10,.0f}" for w in waits))
    best = max(cells, key=lambda key: median_of(cells[key].x_ceiling))
    ratio = median_of(cells[best].x_ceiling)
    print(
        f"\nbest cell {cells[best].name}: {cells[best].median:,.0f} sims/s = {ratio:.2f}x the in-process"
        f" ceiling ({top.name}, median {top.median:,.0f}), {median_of(cells[best].x_best):.2f}x the best"
        f" in-process self-play ({best_side.row.name}, median {best_side.row.median:,.0f} sims/s)"
    )
    if device == "cpu":
        print(f"target (CPU): >= {CPU_TARGET}x the ceiling: {'met' if ratio >= CPU_TARGET else 'NOT met'}")
    ray.shutdown()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
