"""search=ray_async over several nodes: the inference actors spread one a node, and a process that
joins the service (a self-play worker) sends its batches to its own node's actor, so that the
nodes' rates add up (`benchmarks/ray_nodes.py` measures it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from framework_plugins.ray_runtime import reaper as ray_reaper
from framework_plugins.ray_runtime import runtime as ray_runtime
from tests.conftest import REPO

# In its own process: the test session's Ray is a one-node Ray, and this needs a driver of the cluster.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    from framework_plugins.gomoku.rules import Gomoku
    from framework_plugins.mcts.config import RayAsyncConfig
    from framework_plugins.mcts.engines import uniform_evaluator
    from framework_plugins.mcts.service import RayInference

    ray.init(address=sys.argv[1], logging_level="ERROR")
    game = Gomoku(9, 5)
    cfg = RayAsyncConfig(inference_actors=2, inference_num_gpus=0.0, batch_size=4, max_restarts=0)
    inference = RayInference.start(cfg, uniform_evaluator(game))

    @ray.remote(num_cpus=0)
    class Probe:
        def run(self, address, batches):
            service = RayInference.join(cfg, address)
            planes = np.zeros((4, game.n_planes, 9, 9), dtype=np.float32)
            for _ in range(batches):
                ray.get(service.client.infer_async("best", planes, 0)[0])
            turns = [service.client.names[i] for i in service.client.turns]
            return ray.get_runtime_context().get_node_id(), turns

    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    on = [NodeAffinitySchedulingStrategy(n, soft=False) for n in nodes]
    probes = [Probe.options(scheduling_strategy=where).remote() for where in on]
    joined = ray.get([p.run.remote(inference.address, 5 + 5 * i) for i, p in enumerate(probes)], timeout=120)
    where = dict(zip(inference.client.names, inference.client.where()))
    print(json.dumps({
        "nodes": nodes,
        "joined": joined,
        "actors": {name: {"node": w["node_id"], "positions": w["positions"]} for name, w in where.items()},
    }))
    inference.close()
    """
)


def test_each_node_s_worker_feeds_its_own_node_s_inference_actor() -> None:
    from ray.cluster_utils import Cluster  # RAY_AUTH_MODE=token: tests/conftest.py

    temp_before = set(Path(tempfile.gettempdir()).glob("pymp-*"))  # multiprocessing's temp folders

    cluster = Cluster(
        initialize_head=True,
        connect=False,
        # No dashboard: nothing here needs one, it takes CPU, and the forkserver of its module
        # processes leaves a temp folder (pymp-*) behind when the cluster ends.
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": False,
            "_system_config": dict(ray_runtime.SYSTEM_CONFIG),
        },
    )
    session = cluster.head_node.get_session_dir_path()
    try:
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, cluster.address],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=REPO,
            env={**os.environ, "RAY_AUTH_MODE": "token"},
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        cluster.shutdown()
        ray_reaper.remove_session(session)
    assert set(Path(tempfile.gettempdir()).glob("pymp-*")) <= temp_before  # none left behind
    actors = found["actors"]
    assert {a["node"] for a in actors.values()} == set(found["nodes"])  # one actor a node
    for i, (node, turns) in enumerate(found["joined"]):
        assert [actors[name]["node"] for name in turns] == [node]  # its own node's actor only
        assert actors[turns[0]]["positions"] == 4 * (5 + 5 * i)  # and that actor served it alone
