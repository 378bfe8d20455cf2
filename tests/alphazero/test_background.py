"""Training beside self-play (agent.background_training): the trainer thread's phases, the waits
that keep the replay ratio, weights handed to the main thread, and failures raised there."""

from __future__ import annotations

import itertools
import threading
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from framework_plugins.alphazero.agent import AlphaZeroAgent
from framework_plugins.alphazero.background import MOST_DUE, BackgroundLearning
from framework_plugins.alphazero.config import AlphaZeroConfig
from framework_plugins.alphazero.device_training import DeviceReplay
from framework_plugins.alphazero.replay import PositionReplay
from framework_plugins.boardgames.searches import RunSearches
from framework_plugins.gomoku.rules import Gomoku
from tests.conftest import LOADED_S

GAME = Gomoku(6, 4)
PHASE_S = 1.0


class Published:
    """The run's inference service as far as the trainer is concerned: who published what, where."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, np.ndarray]]] = []

    def publish(self, model: str, weights: dict[str, np.ndarray]) -> int:
        self.calls.append((model, threading.current_thread().name, weights))
        return len(self.calls)


def agent_and_ctx(*, slow_s: float = PHASE_S, fail_at: int = 0) -> tuple[AlphaZeroAgent, Any, list[float]]:
    cfg = AlphaZeroConfig(blocks=1, channels=8, gating=False, updates_per_phase=2, batch_size=8, min_replay=8)
    agent = AlphaZeroAgent(cfg)
    agent.learner.setup(GAME, "cpu")
    assert agent.learner.replay is not None
    rng = np.random.default_rng(0)
    n, planes = 64, (GAME.n_planes, *GAME.board_shape)
    agent.learner.replay.add(
        (rng.random((n, *planes)) < 0.2).astype(np.uint8),
        np.full((n, GAME.n_actions), 1 / GAME.n_actions, dtype=np.float32),
        rng.choice([-1.0, 1.0], n).astype(np.float32),
    )
    started: list[float] = []
    train = agent.learner.train_phase

    def slow_phase(rng: np.random.Generator, learning_rate: float) -> None:
        started.append(time.monotonic())
        if fail_at and len(started) == fail_at:
            raise RuntimeError("the phase's update failed")
        time.sleep(slow_s)
        train(rng, learning_rate)

    agent.learner.train_phase = slow_phase  # type: ignore[method-assign]
    published = Published()
    plugin = SimpleNamespace(start_inference=lambda source, **_: published)
    searches = RunSearches(plugin, GAME, agent.evaluator, device="cpu")  # type: ignore[arg-type]
    ctx = SimpleNamespace(stop=threading.Event(), parts={"search": searches}, total_steps=10_000)
    ctx.inference = published  # what the test reads back
    return agent, ctx, started


def test_phases_run_in_a_thread_and_self_play_waits_only_while_two_are_due() -> None:
    agent, ctx, started = agent_and_ctx()
    before = agent.learner.weights("net")
    background = BackgroundLearning(agent, ctx, GAME, np.random.default_rng(1))
    try:
        t0 = time.monotonic()
        for step in (100, 200):  # one under way and one due: self-play goes on at once
            background.owe_phase(step)
        assert time.monotonic() - t0 < PHASE_S / 2
        background.owe_phase(300)  # a third: waits until the first is done
        assert time.monotonic() - t0 >= PHASE_S * 0.9
        assert MOST_DUE == 2
        background.idle(timeout_s=30)
        assert agent.counters["phases"] == 3 and agent.counters["updates"] == 6
        assert background.phases_done == 3
        # Phases one after another, never two at once.
        assert all(b - a >= PHASE_S * 0.9 for a, b in itertools.pairwise(started))
        after = agent.learner.weights("net")
        assert any(not np.array_equal(before[k], after[k]) for k in before)  # it trained
        # The weights for self-play (no gating: each phase's) are published by the thread that delivers.
        assert ctx.inference.calls == []
        assert background.deliver() == []
        assert [(m, t) for m, t, _ in ctx.inference.calls] == [("best", threading.current_thread().name)] * 3
        assert all(np.array_equal(ctx.inference.calls[-1][2][k], after[k]) for k in after)
    finally:
        background.close()
    assert not any(t.name.startswith("alphazero-") for t in threading.enumerate())


def test_a_phase_that_fails_is_raised_in_the_main_thread_and_the_wait_ends() -> None:
    agent, ctx, _ = agent_and_ctx(slow_s=0.05, fail_at=2)
    background = BackgroundLearning(agent, ctx, GAME, np.random.default_rng(1))
    try:
        background.owe_phase(100)
        background.owe_phase(200)
        with pytest.raises(RuntimeError, match="the phase's update failed"):
            t0 = time.monotonic()
            for step in range(300, 3000, 100):  # would wait for ever for a dead trainer
                background.owe_phase(step)
        assert time.monotonic() - t0 < 10
        with pytest.raises(RuntimeError, match="the phase's update failed"):
            background.deliver()
    finally:
        background.close()


def test_a_stop_ends_the_wait_and_close_waits_for_the_phase_under_way() -> None:
    agent, ctx, started = agent_and_ctx(slow_s=3 * LOADED_S)
    background = BackgroundLearning(agent, ctx, GAME, np.random.default_rng(1))
    for step in (100, 200):
        background.owe_phase(step)
    threading.Timer(0.3, ctx.stop.set).start()
    t0 = time.monotonic()
    background.owe_phase(300)  # waits for the trainer: the stop ends the wait
    assert 0.2 < time.monotonic() - t0 < 0.3 + LOADED_S  # not the phase's end, seconds later
    background.close()  # the phase under way ends first (a checkpoint after it is whole)
    assert len(started) == 1 and agent.counters["phases"] == 1
    assert not any(t.name.startswith("alphazero-") for t in threading.enumerate())


# -- training from the replay's copy on the device (a GPU's path; its updates eager on a CPU) ---------


def test_the_device_replay_takes_new_positions_around_the_ring_and_samples_under_one_symmetry() -> None:
    replay = PositionReplay(5, (4, 6, 6), 36, GAME.symmetry_index)
    mirror = DeviceReplay(replay, torch.device("cpu"))

    def add(values: list[float]) -> None:
        n = len(values)
        replay.add(
            np.zeros((n, 4, 6, 6), np.uint8), np.zeros((n, 36), np.float32), np.array(values, np.float32)
        )

    add([0, 1, 2])
    assert mirror.sync() == 3 and mirror.value.tolist()[:3] == [0, 1, 2] and float(mirror.size) == 3
    assert mirror.sync() == 0
    add([3, 4, 5, 6])  # around the ring's end: rows 3, 4, 0, 1
    assert mirror.sync() == 4
    assert mirror.value.tolist() == replay.value.tolist() == [5, 6, 2, 3, 4]
    add(list(range(10, 22)))  # more than the ring holds between two syncs: all of it
    mirror.sync()
    assert mirror.value.tolist() == replay.value.tolist()

    # A stone and the policy's mass on its cell move together under each position's symmetry.
    replay = PositionReplay(10, (4, 6, 6), 36, GAME.symmetry_index)
    state = GAME.new_state()
    state.play(GAME.from_xy(1, 0))
    policy = np.zeros(36, dtype=np.float32)
    policy[GAME.from_xy(1, 0)] = 1.0
    replay.add(state.planes()[None].astype(np.uint8), policy[None], np.array([0.5], dtype=np.float32))
    mirror = DeviceReplay(replay, torch.device("cpu"))
    mirror.sync()
    torch.manual_seed(0)
    planes, pi, z = mirror.sample(64)
    assert planes.shape == (64, 4, 6, 6) and planes.dtype == torch.float32
    assert len({int(p[1].argmax()) for p in planes}) > 1, "symmetries move the stone"
    for p, target in zip(planes, pi, strict=True):
        assert int(p[1].argmax()) == int(target.argmax()) and float(p[1].sum()) == 1.0
        assert float(p[3].sum()) == 0
    assert (z == 0.5).all()


def test_a_learner_on_the_device_path_trains_and_resumes_a_gpu_checkpoints_adam(tmp_path) -> None:
    agent, _, _ = agent_and_ctx(slow_s=0.0)
    learner = agent.learner
    learner.on_device = True  # the GPU's path, its updates eager here
    before = learner.weights("net")
    learner.train_phase(np.random.default_rng(0), 1e-3)
    assert learner._device is not None and not learner._device.graphed
    stats = learner.take_stats()
    assert {"train/policy_loss", "train/value_loss", "train/policy_entropy"} <= set(stats)
    assert all(np.isfinite(v) for v in stats.values())
    after = learner.weights("net")
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    # A GPU run saves fused, capturable groups and a tensor learning rate: a CPU resumes them.
    assert learner.optimizer is not None
    for group in learner.optimizer.param_groups:
        group.update(fused=True, capturable=True, lr=torch.tensor(1e-3))
    learner.save(tmp_path)
    again = AlphaZeroAgent(agent.cfg)
    again.learner.load(tmp_path, learner.net.spec if learner.net is not None else {})
    again.learner.setup(GAME, "cpu")
    assert again.learner.replay is not None and len(again.learner.replay) == 64
    group = again.learner.optimizer.param_groups[0] if again.learner.optimizer else {}
    assert group["fused"] in (None, False) and not group["capturable"] and group["lr"] == pytest.approx(1e-3)
    again.learner.train_phase(np.random.default_rng(0), 1e-3)
    assert np.isfinite(again.learner.take_stats()["train/policy_loss"])
