"""The DQN agent driven through a RunContext: what it stores, how it explores, checkpoints, errors."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from framework_plugins.buffers.memory_efficient import MemoryEfficientReplayBuffer
from framework_plugins.buffers.replay import ReplayBuffer
from framework_plugins.dqn.agent import DQNAgent, DQNConfig
from framework_plugins.dqn.replay import make_replay

from .conftest import CountingPlugin, make_ctx, trained_agent

NO_TRAINING = {"learning_starts": 10**6, "buffer_size": 100}


def stored(buffer: ReplayBuffer) -> dict[str, np.ndarray]:
    return {key: value.copy() for key, value in buffer.gather(np.arange(len(buffer))).items()}


def test_truncated_episodes_store_the_real_last_observation_and_do_not_end_the_return() -> None:
    agent, ctx = trained_agent(CountingPlugin(max_steps=5), Path("/tmp"), total_steps=12, **NO_TRAINING)
    data = stored(ctx.buffer)
    assert data["observations"][:, 0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    # The 5th step is truncated: its next observation is [5], not the reset observation [0].
    assert data["next_observations"][:, 0].tolist() == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
    assert not data["dones"].any()
    # ...so its TD target bootstraps from Q_target([5]).
    truncated = {key: torch.from_numpy(value[4:5]) for key, value in data.items()}
    with torch.no_grad():
        bootstrap = agent.learner.target(truncated["next_observations"]).max().item()
    expected = 1.0 + agent.cfg.gamma * bootstrap
    assert agent.learner.targets(truncated).item() == pytest.approx(expected)
    assert bootstrap != 0.0


def test_terminated_episodes_store_done(tmp_path: Path) -> None:
    _, ctx = trained_agent(
        CountingPlugin(max_steps=5, terminate_at=3), tmp_path, total_steps=7, **NO_TRAINING
    )
    data = stored(ctx.buffer)
    assert data["next_observations"][:, 0].tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert data["dones"].tolist() == [False, False, True, False, False, True, False]
    # Two 3-step episodes of reward 1 ended; the third is still running.
    assert ctx.tracker.metrics["rollout/ep_rew_mean"] == [(7, 3.0)]
    assert ctx.tracker.metrics["rollout/ep_len_mean"] == [(7, 3.0)]


def test_vector_envs_count_n_env_steps_per_vector_step(tmp_path: Path) -> None:
    _, ctx = trained_agent(CountingPlugin(max_steps=4, n_envs=3), tmp_path, total_steps=30, **NO_TRAINING)
    assert ctx.progress.step == 30 and len(ctx.buffer) == 30
    data = stored(ctx.buffer)
    # Each vector step stores one transition per env, all at the same position in their episodes.
    assert data["observations"][:, 0].tolist() == [t for t in (0, 1, 2, 3) * 3 for _ in range(3)][:30]
    assert data["next_observations"][:, 0].tolist()[9:12] == [4, 4, 4]


class VectorCountingPlugin(CountingPlugin):
    """The same envs, offered as one gymnasium vector env with same-step autoreset."""

    def make_vector(self, *, seed: int, n: int) -> gym.vector.VectorEnv:
        fns = [lambda i=i: self.make(seed=seed + i, index=i) for i in range(n)]
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def test_a_plugins_vector_env_stores_what_single_envs_store(tmp_path: Path) -> None:
    plugins = (CountingPlugin(max_steps=4, terminate_at=3, n_envs=2), VectorCountingPlugin(4, 3, 2, 2))
    data = [stored(trained_agent(p, tmp_path, total_steps=16, **NO_TRAINING)[1].buffer) for p in plugins]
    for key in ("observations", "next_observations", "dones", "rewards"):
        np.testing.assert_array_equal(data[0][key], data[1][key], err_msg=key)
    assert data[1]["next_observations"][:, 0].tolist()[:6] == [1, 1, 2, 2, 3, 3]


def greedy_zero_agent(tmp_path: Path, **cfg: object) -> DQNAgent:
    """An agent on a 4-action env whose greedy action is always 0."""
    agent, _ = trained_agent(CountingPlugin(n_actions=4), tmp_path, total_steps=1, **{**NO_TRAINING, **cfg})
    last = agent.learner.online.head.linear
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([5.0, 0.0, 0.0, 0.0]))
    return agent


def non_greedy_fraction(agent: DQNAgent, step: int, n: int = 4000) -> float:
    agent.step = step
    obs = np.array([1.0], np.float32)
    return sum(agent.act(obs, deterministic=False) != 0 for _ in range(n)) / n


def test_epsilon_greedy_follows_the_exploration_schedule(tmp_path: Path) -> None:
    schedule = {"kind": "linear", "start": 1.0, "end": 0.2, "steps": 1000}
    agent = greedy_zero_agent(tmp_path, exploration=schedule, learning_starts=0)
    # A random action is one of the 3 non-greedy ones 3/4 of the time.
    for step, epsilon in ((0, 1.0), (500, 0.6), (1000, 0.2), (10**6, 0.2)):
        assert non_greedy_fraction(agent, step) == pytest.approx(0.75 * epsilon, abs=0.03), step
    assert all(agent.act(np.array([1.0], np.float32), deterministic=True) == 0 for _ in range(100))


def test_actions_are_uniformly_random_before_learning_starts(tmp_path: Path) -> None:
    agent = greedy_zero_agent(tmp_path, exploration=0.0, learning_starts=100)
    assert non_greedy_fraction(agent, 99) == pytest.approx(0.75, abs=0.03)
    assert non_greedy_fraction(agent, 100) == 0.0


def test_save_and_load_give_the_same_q_values_actions_and_counters(tmp_path: Path) -> None:
    cfg = {"learning_starts": 20, "train_freq": 4, "batch_size": 8, "hidden_sizes": [8], "buffer_size": 100}
    agent, _ = trained_agent(CountingPlugin(max_steps=10, n_actions=3), tmp_path, total_steps=100, **cfg)
    assert agent.learner.n_updates == 21  # a train phase every 4 steps from step 20 to 100
    agent.save(tmp_path)
    copy = DQNAgent(DQNConfig(**cfg))
    copy.load(tmp_path)
    obs = np.linspace(0, 10, 21, dtype=np.float32)[:, None]
    with torch.no_grad():
        assert torch.equal(
            copy.learner.online(torch.from_numpy(obs)), agent.learner.online(torch.from_numpy(obs))
        )
        assert torch.equal(
            copy.learner.target(torch.from_numpy(obs)), agent.learner.target(torch.from_numpy(obs))
        )
    assert [copy.act(o) for o in obs] == [agent.act(o) for o in obs]
    assert (copy.step, copy.learner.n_updates) == (100, 21)
    assert copy.rng.bit_generator.state == agent.rng.bit_generator.state
    saved = copy.learner.optimizer.state_dict()["exp_avg"][0]
    assert torch.equal(saved, agent.learner.optimizer.state_dict()["exp_avg"][0])


@pytest.mark.parametrize("save_buffer", [True, False])
def test_resume_continues_epsilon_and_skips_warm_up_only_with_the_saved_buffer(
    tmp_path: Path, save_buffer: bool
) -> None:
    cfg = DQNConfig(
        learning_starts=50, train_freq=10, batch_size=8, hidden_sizes=[8], buffer_size=500,
        exploration={"kind": "linear", "start": 1.0, "end": 0.0, "steps": 200},
        log_every_steps=10, save_buffer=save_buffer,
    )  # fmt: skip
    first = DQNAgent(cfg)
    first.learn(make_ctx(CountingPlugin(), tmp_path, total_steps=100, buffer=ReplayBuffer(capacity=500)))
    first.save(tmp_path)
    assert (tmp_path / "replay.npz").is_file() == save_buffer
    resumed = DQNAgent(cfg)
    resumed.load(tmp_path)
    ctx = make_ctx(
        CountingPlugin(), tmp_path, total_steps=200, buffer=ReplayBuffer(capacity=500), start_step=100
    )
    resumed.learn(ctx)
    epsilon = dict(ctx.tracker.metrics["train/epsilon"])
    assert min(epsilon) == 110 and epsilon[110] == pytest.approx(0.45) and epsilon[200] == 0.0
    updates = dict(ctx.tracker.metrics["train/n_updates"])
    # 6 train phases (steps 50..100) before the checkpoint; with the buffer, training goes on at
    # step 110; without it, the new buffer first gathers learning_starts=50 transitions (step 150).
    assert updates[110] == (7 if save_buffer else 6)
    assert updates[150] == (11 if save_buffer else 7)
    assert len(ctx.buffer) == (200 if save_buffer else 100)


def test_a_resumed_run_goes_on_with_the_last_episodes_its_rollout_means_are_over(tmp_path: Path) -> None:
    """rollout/ep_rew_mean went from 63.1 before a resume to 231.7 just after (72.6 uninterrupted): the
    100-episode window started over, with the few episodes since the resume."""
    import json

    cfg = DQNConfig(learning_starts=50, batch_size=8, hidden_sizes=[8], buffer_size=500, log_every_steps=10)
    first = DQNAgent(cfg)
    first.learn(make_ctx(CountingPlugin(), tmp_path, total_steps=100, buffer=ReplayBuffer(capacity=500)))
    first.save(tmp_path)
    assert json.loads((tmp_path / "dqn.json").read_text())["episodes"]["lengths"] == [5] * 20
    resumed = DQNAgent(cfg)
    resumed.load(tmp_path)
    ctx = make_ctx(
        CountingPlugin(), tmp_path, total_steps=200, buffer=ReplayBuffer(capacity=500), start_step=100
    )
    resumed.learn(ctx)
    assert resumed._runner is not None and len(resumed._runner.window()["lengths"]) == 40


def test_memory_efficient_buffer_gets_the_newest_frame_of_each_stacked_observation(tmp_path: Path) -> None:
    buffer = MemoryEfficientReplayBuffer(capacity=50, frame_history_len=3)
    replay = make_replay(buffer, buffer_size=50, obs_shape=(3, 2, 2), n_envs=1, seed=0)
    frames = [np.full((2, 2), i, np.uint8) for i in range(5)]
    replay.start(0, np.stack([frames[0]] * 3))
    for i in range(1, 5):
        obs = np.stack([frames[max(j, 0)] for j in range(i - 3, i)])
        replay.add(0, obs, 1, 1.0, np.stack([frames[max(j, 0)] for j in range(i - 2, i + 1)]), i == 4)
    sample = buffer.gather(np.arange(4))
    assert sample["observations"][0, :, 0, 0].tolist() == [0, 0, 0]
    assert sample["next_observations"][3, :, 0, 0].tolist() == [2, 3, 4]
    assert sample["dones"].tolist() == [False, False, False, True]


@pytest.mark.parametrize(
    ("buffer", "kwargs", "message"),
    [
        (
            MemoryEfficientReplayBuffer(capacity=10, frame_history_len=4),
            {"n_envs": 2},
            "MemoryEfficientReplayBuffer keeps one trajectory at a time: it needs env.n_envs=1, not 2",
        ),
        (
            MemoryEfficientReplayBuffer(capacity=10, frame_history_len=4),
            {"obs_shape": (2, 84, 84)},
            r"buffer.frame_history_len=4 of them: it needs observations of 4 stacked frames shaped "
            r"\(4, H, W\), and this env gives \(2, 84, 84\). Use buffer=replay",
        ),
        (
            MemoryEfficientReplayBuffer(capacity=10, frame_history_len=4),
            {"obs_shape": (84, 84)},
            r"and this env gives \(84, 84\)",
        ),
        (
            ReplayBuffer(capacity=10),
            {"buffer_size": 20},
            r"agent.buffer_size=20 but the selected buffer has buffer.capacity=10",
        ),
    ],
)
def test_replay_mismatches_fail_clearly(buffer: object, kwargs: dict, message: str) -> None:
    args = {"buffer_size": 10, "obs_shape": (4, 84, 84), "n_envs": 1, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        make_replay(buffer, **args)


def test_without_a_selected_buffer_the_agent_builds_a_replay_buffer_of_buffer_size() -> None:
    replay = make_replay(None, buffer_size=123, obs_shape=(4,), n_envs=2, seed=0)
    assert type(replay.buffer).__name__ == "ReplayBuffer" and replay.buffer.capacity == 123


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"loss": "l1"}, r"agent.loss='l1' is not valid; choose one of huber, mse"),
        ({"activation": "swish"}, r"agent.activation='swish' is not valid; choose one of relu, tanh, elu"),
        ({"network": "resnet"}, r"agent.network='resnet' is not valid; choose one of auto, mlp, cnn"),
        (
            {"exploration": {"kind": "exponential"}},
            r"agent.exploration.kind='exponential' is not a schedule kind",
        ),
        (
            {"learning_rate": {"kind": "step", "value": 1}},
            r"agent.learning_rate.kind='step' is not a schedule",
        ),
        ({"gradient_steps": 0}, r"agent.gradient_steps=0 must be >= 1, or -1"),
        ({"tau": 0.0}, r"agent.tau=0.0 must be in \(0, 1\]"),
        ({"train_freq": 0}, r"agent.train_freq=0 must be >= 1"),
    ],
)
def test_bad_config_values_fail_naming_the_key_and_the_valid_choices(cfg: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DQNAgent(DQNConfig(**cfg))


def test_a_continuous_action_space_is_refused(tmp_path: Path) -> None:
    class Continuous(CountingPlugin):
        def make(self, **kwargs: object) -> gym.Env:
            return gym.make("MountainCarContinuous-v0")

    with pytest.raises(ValueError, match=r"agent=dqn needs a discrete action space, and this env's is Box"):
        trained_agent(Continuous(), tmp_path, total_steps=10)


def test_n_step_transitions_sum_discounted_rewards_and_end_at_termination(tmp_path: Path) -> None:
    cfg = {**NO_TRAINING, "n_step": 3, "gamma": 0.5}
    _, ctx = trained_agent(CountingPlugin(max_steps=10, terminate_at=4), tmp_path, total_steps=8, **cfg)
    data = stored(ctx.buffer)
    # Per episode of 4 steps: from s0 and s1 over 3 steps (1 + 0.5 + 0.25), then the shorter
    # sums that reach the termination at s4 (done).
    assert data["observations"][:, 0].tolist() == [0, 1, 2, 3] * 2
    assert data["next_observations"][:, 0].tolist() == [3, 4, 4, 4] * 2
    assert data["rewards"].tolist() == [1.75, 1.75, 1.5, 1.0] * 2
    assert data["dones"].tolist() == [False, True, True, True] * 2


def test_n_step_drops_the_tail_of_truncated_episodes_and_keeps_envs_apart(tmp_path: Path) -> None:
    cfg = {**NO_TRAINING, "n_step": 2, "gamma": 0.5}
    _, ctx = trained_agent(CountingPlugin(max_steps=3, n_envs=2), tmp_path, total_steps=12, **cfg)
    data = stored(ctx.buffer)
    # Each 3-step episode truncates: windows from s0 and s1 (2 steps each); s2's 1-step window,
    # which would bootstrap with gamma^1 rather than gamma^2, is dropped.
    assert data["observations"][:, 0].tolist() == [0, 0, 1, 1] * 2
    assert data["next_observations"][:, 0].tolist() == [2, 2, 3, 3] * 2
    assert data["rewards"].tolist() == [1.5] * 8 and not data["dones"].any()


def test_n_step_targets_bootstrap_with_gamma_to_the_n(tmp_path: Path) -> None:
    agent, _ = trained_agent(CountingPlugin(), tmp_path, total_steps=1, **NO_TRAINING, n_step=3, gamma=0.9)
    assert agent.learner.gamma == pytest.approx(0.9**3)
    with pytest.raises(ValueError, match=r"agent.n_step=3 needs a buffer of whole transitions"):
        make_replay(MemoryEfficientReplayBuffer(capacity=10), buffer_size=10, obs_shape=(4, 8, 8), n_envs=1,
                    seed=0, n_step=3)  # fmt: skip


def test_a_run_that_ends_before_training_starts_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`total_steps=1000` with the preset's learning_starts=1000 finished silently, untrained."""
    caplog.set_level("WARNING", logger="framework")
    trained_agent(CountingPlugin(), tmp_path, total_steps=200, learning_starts=500, batch_size=32)
    said = [r.getMessage() for r in caplog.records if "it trains nothing" in r.getMessage()]
    assert said == [
        "training starts once the replay holds 500 transitions (agent.learning_starts=500, "
        "agent.batch_size=32), and this run ends at step 200: it trains nothing (raise total_steps)"
    ], said
    caplog.clear()
    trained_agent(CountingPlugin(), tmp_path, total_steps=200, learning_starts=100, batch_size=32)
    assert not [r for r in caplog.records if "it trains nothing" in r.getMessage()]
