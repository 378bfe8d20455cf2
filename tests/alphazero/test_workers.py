"""The AlphaZero agent's self-play workers (plugins/alphazero/workers.py): Ray actors that join the
run's inference service through the search plugin (DistributedSearch.join), play on when one is
killed and count its death once; `agent.workers` and its neighbours, and the old `search.workers`
refused by its new name, a saved run's moved to it.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from framework import config
from framework.errors import ConfigError
from framework_plugins.alphazero.workers import PlayResult, RayAsyncRunner, WorkerSettings, fold
from framework_plugins.boardgames import BEST, DistributedSearch, SharedInference
from framework_plugins.gomoku.rules import Gomoku
from framework_plugins.mcts.config import RayAsyncConfig
from framework_plugins.mcts.engines import RayAsyncSearch

GAME = Gomoku(9, 5)


class Uniform:
    """A network stand-in: a uniform prior and a value of 0."""

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        return np.zeros((n, GAME.n_actions), np.float32), np.zeros(n, np.float32)


def _runner(eng: Any, seed: int, *, n_games: int) -> Any:
    from framework_plugins.alphazero.selfplay import MoveChoice, VectorizeRunner

    rng = np.random.default_rng(seed)
    return VectorizeRunner(GAME, eng, MoveChoice(1.0, 4), rng, n_games=n_games, noise=True)


def test_self_play_workers_play_on_when_one_is_killed_and_the_death_is_counted_once(
    ray_session: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    plugin = RayAsyncSearch(RayAsyncConfig(num_simulations=30, batch_size=8, max_restarts=2))
    assert isinstance(plugin, DistributedSearch)
    plugin.expect_workers(2, num_cpus=1, keys="agent.workers=2 agent.worker_num_cpus=1")
    inference = plugin.start_inference(Uniform, device="cpu", should_stop=lambda: False)
    assert isinstance(inference, SharedInference)
    source = None
    try:
        source = RayAsyncRunner(
            WorkerSettings(2, num_cpus=1, max_restarts=2, timeout_s=120),
            inference,
            functools.partial(_runner, n_games=4),
            plugin=plugin,
            game=GAME,
            seed=3,
            should_stop=lambda: False,
        )
        source.configure({"temperature": 1.0, "dirichlet_epsilon": 0.25, "num_simulations": 30})
        moves, games = 0, []
        while moves < 40:
            m, finished = source.step()
            moves, games = moves + m, games + finished
        victim = source.placement[0]["pid"]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 120
        after = 0
        while after < 200 or not any(source.deaths):
            assert time.monotonic() < deadline, "self-play stalled after a worker was killed"
            m, finished = source.step()
            after += m
            games += finished
        for _ in range(6):  # the calls queued on the killed worker all failed: still one death
            m, finished = source.step()
            games += finished
        assert source.deaths == [1, 0]
        assert source._wait_alive(0)["pid"] != victim
        # The workers find the inference actors by name: Ray has no handles among a restartable
        # worker's arguments to warn about.
        assert "constructor arguments in the object store" not in capfd.readouterr().err
        assert games, "no game finished"
        assert all(len(g) >= 9 for g in games)  # whole games: 5 in a row needs 9 moves
        # Every position was searched with the service's one version (an evaluator without weights: 0).
        assert {v for g in games for v in g.versions} == {inference.version(BEST)} == {0}
        metrics = source.perf_metrics()
        assert metrics["perf/selfplay_workers"] == 2 and metrics["perf/batch_fill"] > 0
        assert metrics["perf/worker_restarts"] == 1 and metrics["perf/inference_restarts"] == 0
        assert metrics["perf/pending_clamped"] == 0 and metrics["perf/search_sims_per_s"] > 0
        assert source.simulations > 0
    finally:
        if source is not None:
            source.close()
        inference.close()


def _result(sims: int, seconds: float, **figures: float) -> PlayResult:
    return PlayResult(moves=1, records=[], simulations=sims, seconds=seconds, figures=figures, incarnation=1)


def test_the_workers_figures_fold_into_one_searchs() -> None:
    folded = fold(
        [
            _result(300, 1.0, **{"perf/batch_fill": 1.0, "perf/inference_failures": 1.0}),
            _result(100, 1.0, **{"perf/batch_fill": 0.6, "perf/inference_failures": 2.0}),
            _result(0, 0.5, **{"perf/batch_fill": 0.0, "perf/pending_clamped": 3.0}),
        ],
        workers=2,
    )
    # 400 simulations in 2.5 s of calls spread over 2 workers; means by simulations; failures added.
    assert folded["perf/search_sims_per_s"] == pytest.approx(400 / 1.25)
    assert folded["perf/batch_fill"] == pytest.approx((300 * 1.0 + 100 * 0.6) / 400)
    assert folded["perf/inference_failures"] == 3.0
    assert "perf/pending_clamped" not in folded  # each worker's over its life: the runner's to add
    assert fold([], workers=2) == {}


def test_a_search_asked_for_more_workers_than_its_ray_holds_refuses_them_by_the_agents_keys() -> None:
    plugin = RayAsyncSearch(RayAsyncConfig())
    with pytest.raises(ConfigError) as refused:
        plugin.expect_workers(1000, num_cpus=1, keys="agent.workers=1000 agent.worker_num_cpus=1")
    said = str(refused.value)
    assert said.startswith("agent.workers=1000 agent.worker_num_cpus=1 search.inference_actors=1 ")
    assert "1000 self-play worker(s) and 1 inference actor(s) ask for" in said


def test_a_saved_runs_search_workers_are_its_agents_workers() -> None:
    saved = OmegaConf.create(
        {
            "agent": {"name": "alphazero", "blocks": 2},
            "search": {"name": "ray_async", "workers": 2, "worker_num_cpus": 0.5, "batch_size": 16},
        }
    )
    config.migrate(saved)
    assert saved.agent.workers == 2 and saved.agent.worker_num_cpus == 0.5
    assert "workers" not in saved.search and "worker_num_cpus" not in saved.search
    assert saved.search.batch_size == 16
    # Where the agent's key is set already, it stands.
    both = OmegaConf.create(
        {"agent": {"name": "alphazero", "workers": 0}, "search": {"name": "ray_async", "workers": 3}}
    )
    config.migrate(both)
    assert both.agent.workers == 0 and "workers" not in both.search


def test_search_workers_in_a_plugins_section_is_refused_by_its_new_name() -> None:
    section = OmegaConf.create({"name": "ray_async", "workers": 2})
    with pytest.raises(
        ConfigError, match=r"search\.workers is agent\.workers now: give agent\.workers=VALUE"
    ):
        config.typed(section, RayAsyncConfig, "search", "ray_async")
