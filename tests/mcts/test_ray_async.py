"""search=ray_async on a real local Ray (one per test session): the checklist of the pipelined search
and of the run's inference service.

No over-computation (a root's visits plus pending never pass the target), pending visits never
negative and all taken back, also when a search fails mid-way (the refs in flight cancelled);
noise at start nodes only; a batch of the wrong size fails the search; flat action indices; the
sequential search visit for visit with batch_size=1 and async_inflight_limit=1. The inference
actors' weights, deaths and restarts: test_ray_inference_actors.py; the AlphaZero agent's self-play
workers over the service: tests/alphazero/test_workers.py.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

import numpy as np
import pytest

from framework.errors import ConfigError
from framework_plugins.boardgames import BEST, SearchRequest
from framework_plugins.gomoku.rules import GameState, Gomoku
from framework_plugins.mcts.config import RayAsyncConfig, SequentialConfig
from framework_plugins.mcts.engines import RayAsyncSearch, local_search
from framework_plugins.mcts.inference import compact
from framework_plugins.mcts.puct import PuctSearch
from framework_plugins.mcts.service import RayInference
from framework_plugins.mcts.tree import EXPANDED

GAME = Gomoku(9, 5)
SERVICES: dict[int, RayInference] = {}
"""The inference service of each search made by `engine`, closed after each test."""


@pytest.fixture(autouse=True)
def _ray(ray_session: Any) -> Any:
    """The session's Ray; this module's evaluators travel to the actors by value."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    while SERVICES:
        SERVICES.popitem()[1].close()


class Shaped:
    """A deterministic, position-dependent evaluator (a stand-in for a network), optionally slow or broken."""

    def __init__(self, delay_s: float = 0.0, short_at: int = 0, draws: bool = False) -> None:
        self.delay_s, self.short_at, self.draws = delay_s, short_at, draws

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        if self.delay_s:
            time.sleep(self.delay_s)
        n = len(planes)
        flat = planes.reshape(n, planes.shape[1], -1)
        logits = flat[:, 0] * 0.7 - flat[:, 1] * 0.4 + np.sin(np.arange(flat.shape[2]))[None]
        values = np.tanh(0.05 * flat[:, 0].sum(1) - 0.04 * flat[:, 1].sum(1))
        n_out = n - 1 if n == self.short_at else n  # one answer short for batches of this size
        if self.draws:  # a win/draw/loss network's third array: the probability of a draw
            draws = 1 / (1 + np.exp(flat[:, 0].sum(1) - flat[:, 1].sum(1) * 1.5))
            return logits.astype(np.float32), values.astype(np.float32), draws.astype(np.float32)
        return logits[:n_out].astype(np.float32), values[:n_out].astype(np.float32)


def shaped(**kwargs: Any) -> Any:
    return functools.partial(Shaped, **kwargs)


class Uniform:
    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        return np.zeros((n, GAME.n_actions), np.float32), np.zeros(n, np.float32)


def roots(n: int, game: Gomoku = GAME) -> list[GameState]:
    openings = [[], [40], [40, 41], [30, 40, 50], [10, 20], [80]]
    return [GameState.from_moves(game, openings[i % len(openings)]) for i in range(n)]


def engine(factory: Any = None, seed: int = 0, **cfg: Any) -> PuctSearch:
    """A search=ray_async search over an inference service of its own (`service(search)`)."""
    config = RayAsyncConfig(**cfg)
    plugin = RayAsyncSearch(config)
    inference = RayInference.start(config, factory or shaped())
    search = plugin.make(game=GAME, inference=inference, model=BEST, seed=seed)
    SERVICES[id(search)] = inference
    return search


def service(search: PuctSearch) -> RayInference:
    return SERVICES[id(search)]


class Checker:
    """A debug hook: the invariants at every turn of the pipeline, and what it saw."""

    def __init__(self, target: int, fail_at: int | None = None) -> None:
        self.target, self.fail_at = target, fail_at
        self.turns = 0
        self.max_pending = 0

    def __call__(self, eng: PuctSearch, tree: Any) -> None:
        self.turns += 1
        assert (tree.pending_visits >= 0).all(), "a pending count went below 0"
        over = tree.visits[:, 0] - 1 + tree.pending_visits[:, 0]
        assert (over <= self.target).all(), f"visits + pending {over.max()} passed the target {self.target}"
        self.max_pending = max(self.max_pending, int(tree.pending_visits[:, 0].max()))
        assert tree.n_nodes.max() <= tree.capacity
        if self.fail_at is not None and self.turns >= self.fail_at:
            raise KeyboardInterrupt("injected mid-search")


def test_batch_of_one_with_one_in_flight_is_the_sequential_search() -> None:
    """Same seed, same roots, noise on, three moves of tree reuse: the same visits and values."""
    states = roots(4)
    seq_cfg = SequentialConfig(num_simulations=120)
    seq = local_search(seq_cfg, game=GAME, evaluator_factory=shaped(), seed=7)
    ray_engine = engine(seed=7, num_simulations=120, batch_size=1, async_inflight_limit=1)
    try:
        for move in range(3):
            seq_found = seq.search(states, SearchRequest(add_noise=True))
            expected = seq_found.visits
            ray_engine_found = ray_engine.search(states, SearchRequest(add_noise=True))
            got = ray_engine_found.visits
            np.testing.assert_array_equal(got, expected)
            np.testing.assert_allclose(ray_engine_found.values, seq_found.values, rtol=1e-6)
            for i, state in enumerate(states):
                state.play(int(expected[i].argmax()) if move else int(np.argsort(expected[i])[-2]))
    finally:
        ray_engine.close()


def test_a_networks_draw_probabilities_reach_the_tree_through_the_inference_service() -> None:
    """With search.draw_contempt, a network's draws weigh the same over the service as in process
    (and they do weigh: the values differ from those without contempt)."""
    states = roots(3)
    values = {}
    for contempt in (0.0, 0.3):
        seq_cfg = SequentialConfig(num_simulations=100, draw_contempt=contempt)
        seq = local_search(seq_cfg, game=GAME, evaluator_factory=shaped(draws=True), seed=3)
        ray_engine = engine(
            shaped(draws=True),
            seed=3,
            num_simulations=100,
            batch_size=1,
            async_inflight_limit=1,
            draw_contempt=contempt,
        )
        try:
            over_ray, in_process = ray_engine.search(states), seq.search(states)
            np.testing.assert_array_equal(over_ray.visits, in_process.visits)
            np.testing.assert_allclose(over_ray.values, in_process.values, rtol=1e-6)
            values[contempt] = in_process.values
        finally:
            ray_engine.close()
    assert (values[0.3] < values[0.0] - 0.05).all()


@pytest.mark.parametrize("root", ["puct", "gumbel"])
def test_invariants_hold_at_every_turn_of_the_pipeline(root: str) -> None:
    target = 200
    eng = engine(
        num_simulations=target, batch_size=8, async_inflight_limit=3, max_inflight_batches=3, root=root
    )
    checker = Checker(target)
    eng.debug_hook = checker
    try:
        counts = eng.search(roots(6), SearchRequest(add_noise=True)).visits
        assert counts.shape == (6, GAME.n_actions)  # flat action indices
        np.testing.assert_array_equal(counts.sum(1), target)
        forest = eng.tree
        assert forest is not None
        assert (forest.pending_visits[:, :] == 0).all()
        assert eng.clamped == 0
        assert checker.turns > 10 and checker.max_pending > 1  # leaves of one tree were in flight together
        for i, state in enumerate(roots(6)):  # taken cells get no visits
            assert not counts[i][~state.legal].any()
        metrics = eng.perf_metrics()
        assert 0 < metrics["perf/batch_fill"] <= 1
        assert metrics["perf/inflight_mean"] >= 1
        for key in ("perf/queue_wait_ms", "perf/inference_ms", "perf/search_sims_per_s"):
            assert metrics[key] > 0, key
        assert eng.perf_metrics() == {}  # figures since the last call
    finally:
        eng.close()


def test_an_exception_mid_search_rolls_back_pending_and_cancels_refs_in_flight() -> None:
    import ray
    from ray.exceptions import TaskCancelledError

    eng = engine(
        shaped(delay_s=0.2), num_simulations=100, batch_size=2, async_inflight_limit=8, max_inflight_batches=6
    )
    eng.debug_hook = Checker(100, fail_at=3)
    try:
        with pytest.raises(KeyboardInterrupt, match="injected"):
            eng.search(roots(3))
        forest, manager = eng.tree, eng.evaluation.manager  # type: ignore[attr-defined]
        assert forest is not None and manager is not None
        assert (forest.pending_visits[:, :] == 0).all()
        assert manager.pending_count() == 0
        assert len(manager.cancelled) >= 2
        outcomes = []
        for ref in manager.cancelled:
            try:
                ray.get(ref, timeout=30)
                outcomes.append("ran")
            except TaskCancelledError:
                outcomes.append("cancelled")
        assert "cancelled" in outcomes, outcomes  # queued on the actor: dropped
        # The engine searches on afterwards, its budgets intact (to fewer simulations: each batch of
        # this evaluator takes 0.2 s).
        eng.debug_hook = Checker(48)
        counts = eng.search(roots(3), SearchRequest(simulations=48)).visits
        np.testing.assert_array_equal(counts.sum(1), 48)
    finally:
        eng.close()


def test_noise_goes_into_start_nodes_only() -> None:
    eng = engine(lambda: Uniform(), num_simulations=150, batch_size=8, dirichlet_epsilon=1.0)
    try:
        eng.search(roots(2), SearchRequest(add_noise=True))
        forest = eng.tree
        assert forest is not None
        for b, state in enumerate(roots(2)):
            legal = state.legal
            root_prior = forest.prior[b, 0][legal]
            assert root_prior.std() > 1e-3  # noised
            expanded = [n for n in range(1, forest.n_nodes[b]) if forest.state[b, n] == EXPANDED]
            assert len(expanded) > 10
            for n in expanded:
                p = forest.prior[b, n]
                nonzero = p[p > 0]
                np.testing.assert_allclose(nonzero, nonzero[0], rtol=1e-5)  # uniform: no noise deeper
    finally:
        eng.close()


def test_a_batch_of_the_wrong_size_fails_the_search_and_rolls_back() -> None:
    eng = engine(shaped(short_at=4), num_simulations=50, batch_size=4, max_wait_ms=1000)
    try:
        with pytest.raises(RuntimeError, match="returned 3 policies and 3 values for 4 positions"):
            eng.search(roots(2))  # the roots' expansion, a batch of 2, passes; the leaves' batches do not
        forest = eng.tree
        assert forest is not None and forest.visits[:, 0].min() >= 1
        assert (forest.pending_visits[:, :] == 0).all()
    finally:
        eng.close()


def test_planes_of_zeros_and_ones_travel_as_uint8_and_others_as_they_are() -> None:
    binary = np.stack([s.planes() for s in roots(3)]).astype(np.float32)
    small = compact(binary)
    assert small.dtype == np.uint8 and small.nbytes * 4 == binary.nbytes
    np.testing.assert_array_equal(small.astype(np.float32), binary)
    for other in (binary * 0.5, binary - 2.0, binary + 300.0):
        assert compact(other) is other


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("batch_size", 0, "search.batch_size=0 must be >= 1"),
        ("async_inflight_limit", 0, "search.async_inflight_limit=0 must be >= 1"),
        ("max_wait_ms", -1.0, "search.max_wait_ms=-1.0 must be >= 0"),
        ("max_restarts", -2, "search.max_restarts=-2 must be >= 0"),
        ("num_simulations", 0, "search.num_simulations=0 must be >= 1"),
    ],
)
def test_bad_values_are_refused_by_name(key: str, value: Any, said: str) -> None:
    with pytest.raises(ConfigError, match=said.replace(".", r"\.")):
        RayAsyncSearch(RayAsyncConfig(**{key: value}))


@pytest.mark.parametrize("name", ["sequential", "ray_async"])
def test_a_search_each_plugin_makes_over_its_service_keeps_the_search_contract(name: str) -> None:
    from framework import registry
    from framework_plugins import boardgames
    from framework_plugins.mcts.engines import uniform_evaluator

    plugin = registry.load("search", name)(registry.load("search", name).Config())
    inference = plugin.start_inference(uniform_evaluator(GAME), device="cpu", should_stop=lambda: False)
    try:
        assert isinstance(inference, boardgames.InferenceService)
        search = plugin.make(game=GAME, inference=inference, model=BEST, seed=0)
        assert isinstance(search, boardgames.SearchEngine)
        found = search.search(roots(2), boardgames.SearchRequest(simulations=20))
        assert isinstance(found, boardgames.SearchResult) and found.visits.sum(1).tolist() == [20, 20]
        assert found.simulations == 40 and found.values.shape == (2,) and found.chosen_moves.shape == (2,)
        search.close()
    finally:
        inference.close()
