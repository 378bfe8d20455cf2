"""Self-play on Ray over several nodes: do the nodes' rates add up?

A cluster of one node, then of `--nodes` nodes (`ray.cluster_utils.Cluster`, on this machine),
each node holding a self-play worker (`--games` games, `--sims` simulations a move) and an inference
actor (the 9x9 preset's network on the CPU), the workers sending their batches to their own node's
actor (`search=ray_async` spreads its actors over the nodes, and a worker prefers its node's). With
`--pin` (the default where the machine has a core per node), each node's processes run on a core of
their own (the raylet and what it starts inherit its CPU affinity), as nodes of one core each would.

Each cluster is measured over `--seconds` of its RayAsyncRunner after `--warmup` moves; every wait
is bounded (a worker call not back within `--grace` seconds ends the measurement, saying so). The
figure: the N-node rate over N times the one-node rate (the nodes' rates "add up" at 1.0; the aim:
within 20 %, >= 0.8), with the one-node figure printed beside it.

    RAY_AUTH_MODE=token python benchmarks/ray_nodes.py [--nodes 2] [--seconds 20] [--games 32]
        [--sims 100] [--pin | --no-pin]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

GOAL = 0.8


def measure(nodes: int, args: argparse.Namespace, cores: list[int]) -> tuple[float, int]:
    """(sims/s of the whole cluster, distinct nodes its workers ran on)."""
    import ray
    import torch
    from ray.cluster_utils import Cluster

    from framework_plugins.alphazero.network import PolicyValueNet, evaluator_for
    from framework_plugins.alphazero.selfplay import MoveChoice, vectorize_runner
    from framework_plugins.alphazero.workers import RayAsyncRunner, WorkerSettings
    from framework_plugins.gomoku.rules import Gomoku
    from framework_plugins.mcts.config import RayAsyncConfig
    from framework_plugins.mcts.engines import RayAsyncSearch
    from framework_plugins.mcts.service import RayInference
    from framework_plugins.ray_runtime import runtime as ray_runtime

    everything = os.sched_getaffinity(0)
    cluster = None
    try:
        for i in range(nodes):
            if args.pin:  # the node's raylet, and every worker it starts, on core i alone
                os.sched_setaffinity(0, {cores[i]})
            if cluster is None:
                cluster = Cluster(
                    initialize_head=True,
                    connect=False,
                    # No dashboard: it takes CPU the nodes are measured on, and its module
                    # processes' forkserver leaves a temp folder behind when the cluster ends.
                    head_node_args={
                        "num_cpus": 2,
                        "include_dashboard": False,
                        "_system_config": dict(ray_runtime.SYSTEM_CONFIG),
                    },
                )
            else:
                cluster.add_node(num_cpus=2)
        os.sched_setaffinity(0, everything)
        assert cluster is not None
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR")
        game = Gomoku(args.board, 5)
        torch.manual_seed(0)
        net = PolicyValueNet(board_size=args.board, in_planes=game.n_planes, blocks=3, channels=32).eval()
        cfg = RayAsyncConfig(
            num_simulations=args.sims,
            batch_size=args.batch,
            max_wait_ms=5.0,
            inference_actors=nodes,
            inference_num_gpus=0.0,
            max_restarts=0,
        )
        deadline = [time.perf_counter() + args.grace]
        inference = RayInference.start(cfg, lambda: evaluator_for(net, "cpu"))
        try:
            make = functools.partial(
                vectorize_runner, game=game, choice=MoveChoice(1.0, 8), n_games=args.games, noise=True
            )
            source = RayAsyncRunner(
                WorkerSettings(nodes, max_restarts=0),
                inference,
                make,
                plugin=RayAsyncSearch(cfg),
                game=game,
                seed=0,
                should_stop=lambda: time.perf_counter() > deadline[0],
            )
            try:
                spread = len({w["node_id"] for w in source.placement})
                for _ in range(args.warmup * nodes):
                    deadline[0] = time.perf_counter() + args.grace
                    source.step()
                sims, started = source.simulations, time.perf_counter()
                deadline[0] = started + args.seconds + args.grace
                while time.perf_counter() - started < args.seconds:
                    source.step()
                return (source.simulations - sims) / (time.perf_counter() - started), spread
            except KeyboardInterrupt:
                print(f"  {nodes} node(s): a worker call was not back within {args.grace:g} s; no figure")
                return float("nan"), 0
            finally:
                source.close()
        finally:
            inference.close()
    finally:
        os.sched_setaffinity(0, everything)
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0, help="each measurement's length")
    parser.add_argument("--warmup", type=int, default=3, help="worker calls (moves) left out, per node")
    parser.add_argument("--grace", type=float, default=120.0, help="how long a worker call may take")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--games", type=int, default=32)
    parser.add_argument("--sims", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32, help="search.batch_size")
    parser.add_argument("--board", type=int, default=9)
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=None)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "token")  # a cluster of several nodes needs it said
    from framework.machine import short_openmp_spin

    short_openmp_spin()  # as `python -m framework` does, before torch is imported
    cores = sorted(os.sched_getaffinity(0))
    if args.pin is None:
        args.pin = len(cores) >= args.nodes
    if args.pin and len(cores) < args.nodes:
        raise SystemExit(f"--pin: {args.nodes} nodes need a core each; this process may use {len(cores)}")
    print(
        f"{args.nodes} nodes against 1, {args.games} games x {args.sims} simulations a move per worker, one"
        f" worker and one inference actor a node{', each node on a core of its own' if args.pin else ''};"
        f" {args.repeats} x {args.seconds:g} s each, alternating",
        flush=True,
    )
    rates: dict[int, list[float]] = {1: [], args.nodes: []}
    for r in range(args.repeats):
        for nodes in (1, args.nodes) if r % 2 == 0 else (args.nodes, 1):
            rate, spread = measure(nodes, args, cores)
            rates[nodes].append(rate)
            print(f"  {nodes} node(s), workers on {spread} node(s): {rate:,.0f} sims/s", flush=True)
    one = statistics.median(rates[1])
    many = statistics.median(rates[args.nodes])
    ratio = many / (args.nodes * one)
    met = "met" if ratio >= GOAL else "MISSED"
    print(
        f"\n1 node: {one:,.0f} sims/s; {args.nodes} nodes: {many:,.0f} sims/s = {ratio:.2f}x {args.nodes}"
        f" times one node's (medians of {args.repeats})\n  [{met}] the nodes' rates add up within 20 %:"
        f" >= {GOAL}"
    )


if __name__ == "__main__":
    main()
