"""The run's inference actors on a real local Ray: weights that carry a version, a restarted actor
that answers with the current weights before anything else, a death counted once, and a clear
error when an actor cannot be restarted (the search over them: test_ray_async.py)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import numpy as np
import pytest

from framework.errors import ExplainedError
from framework_plugins.boardgames import BEST
from framework_plugins.mcts.puct import PuctSearch
from framework_plugins.mcts.service import RayInference
from tests.mcts import test_ray_async
from tests.mcts.test_ray_async import GAME, SERVICES, engine, roots, service, shaped


@pytest.fixture(autouse=True)
def _ray(ray_session: Any) -> Any:
    """The session's Ray; the evaluators of both modules travel to the actors by value."""
    import ray.cloudpickle

    for module in (sys.modules[__name__], test_ray_async):
        ray.cloudpickle.register_pickle_by_value(module)
    yield
    while SERVICES:
        SERVICES.popitem()[1].close()


def _kill_actor_at(turn: int) -> Any:
    state: dict[str, Any] = {"turns": 0, "killed": None}

    def hook(eng: PuctSearch, tree: Any) -> None:
        state["turns"] += 1
        if state["turns"] == turn:
            pid = service(eng).client.where()[0]["pid"]
            os.kill(pid, signal.SIGKILL)
            state["killed"] = pid

    return hook, state


@pytest.mark.parametrize("actors", [1, 2])
def test_a_killed_inference_actor_is_restarted_counted_once_and_the_search_completes(actors: int) -> None:
    eng = engine(
        shaped(delay_s=0.01),
        num_simulations=150,
        batch_size=8,
        inference_actors=actors,
        max_restarts=2,
        max_inflight_batches=3,
    )
    hook, state = _kill_actor_at(5)
    eng.debug_hook = hook
    counts = eng.search(roots(4)).visits
    assert state["killed"]
    np.testing.assert_array_equal(counts.sum(1), 150)
    # Every batch in flight failed with the actor: one death all the same.
    assert service(eng).check_actors() == 1
    assert service(eng).actors.deaths[0] == 1
    assert state["killed"] not in {a["pid"] for a in service(eng).client.where()}
    assert eng.tree is not None and (eng.tree.pending_visits == 0).all()
    assert eng.clamped == 0


def test_an_inference_actor_that_cannot_restart_is_one_clear_error_naming_it() -> None:
    eng = engine(shaped(delay_s=0.01), num_simulations=150, batch_size=8, max_restarts=0)
    hook, _ = _kill_actor_at(5)
    eng.debug_hook = hook
    with pytest.raises(
        ExplainedError, match=r"inference actor framework-inference-\w+-0 died and Ray cannot restart"
    ):
        eng.search(roots(4))
    assert eng.tree is not None and (eng.tree.pending_visits == 0).all()


def _net_evaluator(seed: int) -> Any:
    import torch

    from framework_plugins.alphazero.network import NetworkEvaluator, PolicyValueNet

    torch.manual_seed(seed)
    return NetworkEvaluator(
        PolicyValueNet(board_size=9, in_planes=GAME.n_planes, blocks=1, channels=8).eval(), "cpu"
    )


def _answers(inference: RayInference, planes: np.ndarray, min_version: int) -> list[Any]:
    import ray

    return [ray.get(a.infer.remote(BEST, planes, min_version), timeout=60) for a in inference.client.actors]


def test_weights_carry_a_version_and_every_actor_answers_with_the_current_ones() -> None:
    first, second = _net_evaluator(0), _net_evaluator(1)
    eng = engine(lambda: first, num_simulations=60, batch_size=4, inference_actors=2, max_inflight_batches=2)
    inference = service(eng)
    assert eng.search(roots(4)).version == 1  # the first weights, published when the service started
    served = inference.client.where()
    assert len({a["pid"] for a in served}) == 2
    assert all(a["batches"] >= 2 for a in served), served  # each actor took a share of the batches
    if sys.platform.startswith("linux"):  # glibc keeps the forwards' freed memory in CPU actors
        assert all(a["kept_memory"] for a in served), served
    assert inference.publish(BEST, second.weights()) == 2
    found = eng.search(roots(4))
    np.testing.assert_array_equal(found.visits.sum(1), 60)
    assert found.version == 2
    assert [a["versions"][BEST] for a in inference.client.where()] == [2, 2]
    planes = np.stack([s.planes() for s in roots(2)]).astype(np.float32)
    want_logits, want_values = second(planes)
    for answer in _answers(inference, planes, 2):
        assert answer.version == 2
        np.testing.assert_allclose(answer.logits, want_logits, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(answer.values, want_values, rtol=1e-5, atol=1e-5)
    assert not np.allclose(first(planes)[0], want_logits, atol=1e-3)  # the two networks differ
    # Through the client, planes travel compacted when that loses nothing, as they are otherwise.
    import ray

    for sent in (planes, planes * 0.37):
        want_logits, _ = second(sent)
        for _ in inference.client.actors:
            ref, _actor = inference.client.infer_async(BEST, sent, 2)
            np.testing.assert_allclose(ray.get(ref, timeout=60).logits, want_logits, rtol=1e-5, atol=1e-5)


def test_a_restarted_inference_actor_answers_its_first_batch_with_the_current_weights() -> None:
    import ray

    first, trained = _net_evaluator(0), _net_evaluator(1)
    eng = engine(lambda: first, num_simulations=30, batch_size=4, max_restarts=2)
    inference = service(eng)
    for _ in range(3):  # versions 2..4: the last one is the trained network's
        inference.publish(BEST, trained.weights())
    planes = np.stack([s.planes() for s in roots(3)]).astype(np.float32)
    before = inference.client.where(0)
    os.kill(before["pid"], signal.SIGKILL)
    inference.check_actors()  # waits until Ray has it up again; the death counted
    assert inference.actors.deaths == [1]
    after = inference.client.where(0)
    assert after["pid"] != before["pid"] and after["incarnation"] == 2
    # Nothing was pushed to the new actor: it took the current weights from the keeper as it started,
    # and its very first answer, even to a batch that asks for no version, is theirs.
    assert after["versions"] == {BEST: 4} and after["batches"] == 0
    (answer,) = _answers(inference, planes, 0)
    assert answer.version == 4
    np.testing.assert_allclose(answer.logits, trained(planes)[0], rtol=1e-5, atol=1e-5)
    # The search goes on with it, every answer of the current version.
    found = eng.search(roots(3))
    np.testing.assert_array_equal(found.visits.sum(1), 30)
    assert found.version == 4
    ray.get(inference.client.actors[0].where.remote(), timeout=30)
