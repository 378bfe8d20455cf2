"""The weights keeper on a real local Ray: killed, it is restarted by Ray and seeded again from the
run's process before it answers anything about weights; an inference actor that restarts while the
keeper is down starts from the current weights all the same; each death is counted once, the
keeper's apart from the actors'. (The same in a whole run: tests/alphazero/test_chaos.py.)"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import numpy as np
import pytest

from framework_plugins.boardgames import BEST
from framework_plugins.mcts.service import RayInference
from tests.mcts import test_ray_async, test_ray_inference_actors
from tests.mcts.test_ray_async import SERVICES, engine, roots, service
from tests.mcts.test_ray_inference_actors import _answers, _net_evaluator


@pytest.fixture(autouse=True)
def _ray(ray_session: Any) -> Any:
    """The session's Ray; the evaluators of these modules travel to the actors by value."""
    import ray.cloudpickle

    for module in (sys.modules[__name__], test_ray_async, test_ray_inference_actors):
        ray.cloudpickle.register_pickle_by_value(module)
    yield
    while SERVICES:
        SERVICES.popitem()[1].close()


def _keeper_pid(inference: RayInference) -> int:
    import ray

    return int(ray.get(inference.client.keeper.where.remote(), timeout=60)["pid"])


def _published_three_times() -> tuple[RayInference, Any]:
    """A service of one inference actor whose BEST is at version 4, the trained network's weights."""
    first, trained = _net_evaluator(0), _net_evaluator(1)
    eng = engine(lambda: first, num_simulations=30, batch_size=4, max_restarts=2)
    inference = service(eng)
    for _ in range(3):
        inference.publish(BEST, trained.weights())
    return inference, trained


def test_a_killed_keeper_answers_nothing_older_than_the_published_version_and_is_counted_once() -> None:
    import ray

    inference, _ = _published_three_times()
    # A worker's view of the service: the versions its searches begin with come from the keeper.
    joined = RayInference.join(inference.cfg, inference.address)
    dead = _keeper_pid(inference)
    os.kill(dead, signal.SIGKILL)
    # Asked at once, the restarted keeper waits to be seeded again rather than answer empty.
    assert joined.version(BEST) == 4
    assert ray.get(inference.client.keeper.current.remote(), timeout=60)[BEST][0] == 4
    inference.check_actors()
    where = ray.get(inference.client.keeper.where.remote(), timeout=60)
    assert where["pid"] != dead and where["incarnation"] == 2 and where["seeded"]
    assert (inference.keeper_deaths, inference.actors.deaths) == (1, [0])
    assert joined.keeper_deaths == 0  # only the process that started the service counts deaths
    # It takes the next version as any keeper does, and the death stays counted once.
    assert inference.publish(BEST, _net_evaluator(2).weights()) == 5
    assert joined.version(BEST) == 5
    inference.check_actors()
    assert inference.keeper_deaths == 1


def test_an_inference_actor_restarted_while_the_keeper_is_down_answers_with_the_current_weights() -> None:
    inference, trained = _published_three_times()
    actor_pid = inference.client.where(0)["pid"]
    os.kill(_keeper_pid(inference), signal.SIGKILL)
    os.kill(actor_pid, signal.SIGKILL)
    inference.check_actors()  # waits until Ray has both up again, each death counted
    assert (inference.keeper_deaths, inference.actors.deaths) == (1, [1])
    after = inference.client.where(0)
    # Nothing was pushed to it: it waited for the keeper to be seeded again, and loaded its weights.
    assert after["pid"] != actor_pid and after["versions"] == {BEST: 4} and after["batches"] == 0
    planes = np.stack([s.planes() for s in roots(3)]).astype(np.float32)
    (answer,) = _answers(inference, planes, 0)
    assert answer.version == 4
    np.testing.assert_allclose(answer.logits, trained(planes)[0], rtol=1e-5, atol=1e-5)
