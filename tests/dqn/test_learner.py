"""The Q-learning update: TD targets (vanilla, double-Q, terminal), target sync, training."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from framework_plugins.buffers.replay import ReplayBuffer
from framework_plugins.dqn.learner import QLearner
from framework_plugins.dqn.networks import MLPQNetwork


def make_learner(network: MLPQNetwork, **settings: Any) -> QLearner:
    options = {"gamma": 0.9, "double_q": False, "loss": "huber", "max_grad_norm": None, "adam_eps": 1e-8}
    return QLearner(network, device="cpu", **{**options, **settings})


def linear_learner(
    online: list[float], target: list[float], *, double_q: bool, gamma: float = 0.9
) -> QLearner:
    """Q networks on a 1-d observation s with no hidden layer: Q(s, a) = w[a]·s."""
    learner = make_learner(
        MLPQNetwork(1, len(online), [], "relu", False), gamma=gamma, double_q=double_q, max_grad_norm=10.0
    )
    for net, weights in ((learner.online, online), (learner.target, target)):
        layer = net.head.linear
        with torch.no_grad():
            layer.weight.copy_(torch.tensor(weights).unsqueeze(1))
            layer.bias.zero_()
    return learner


def batch(next_obs: list[float], rewards: list[float], dones: list[bool]) -> dict[str, torch.Tensor]:
    return {
        "next_observations": torch.tensor(next_obs).unsqueeze(1),
        "rewards": torch.tensor(rewards),
        "dones": torch.tensor(dones),
    }


# Online Q(s') = [s', -s'] (argmax: action 0 for s' > 0, action 1 for s' < 0);
# target Q(s') = [2s', 3s'] (max: action 1 for s' > 0, action 0 for s' < 0).
ONLINE, TARGET = [1.0, -1.0], [2.0, 3.0]
HAND_MADE = batch(next_obs=[1.0, 2.0, -1.0], rewards=[1.0, 1.0, 0.5], dones=[False, True, False])


def test_vanilla_target_takes_the_max_of_the_target_network() -> None:
    targets = linear_learner(ONLINE, TARGET, double_q=False).targets(HAND_MADE)
    # s'=1: max(2, 3) = 3; s'=2: terminal; s'=-1: max(-2, -3) = -2.
    assert targets.tolist() == pytest.approx([1.0 + 0.9 * 3.0, 1.0, 0.5 + 0.9 * -2.0])


def test_double_q_picks_with_the_online_network_and_values_with_the_target() -> None:
    targets = linear_learner(ONLINE, TARGET, double_q=True).targets(HAND_MADE)
    # s'=1: online picks 0, target values it 2; s'=-1: online picks 1, target values it -3.
    assert targets.tolist() == pytest.approx([1.0 + 0.9 * 2.0, 1.0, 0.5 + 0.9 * -3.0])


def test_terminal_transitions_do_not_bootstrap() -> None:
    learner = linear_learner(ONLINE, TARGET, double_q=True)
    terminal = learner.targets(batch([100.0, -100.0], [0.25, -0.5], [True, True]))
    assert terminal.tolist() == [0.25, -0.5]


def test_hard_and_polyak_target_updates() -> None:
    learner = linear_learner([1.0, 2.0], [3.0, 6.0], double_q=False)
    learner.sync_target(0.25)
    assert learner.target.head.linear.weight.squeeze(1).tolist() == pytest.approx([2.5, 5.0])
    learner.sync_target(1.0)
    assert learner.target.head.linear.weight.squeeze(1).tolist() == [1.0, 2.0]


def test_q_values_converge_to_the_rewards_when_gamma_is_zero() -> None:
    learner = make_learner(MLPQNetwork(1, 2, [16], "relu", False), gamma=0.0, double_q=True, loss="mse")
    learner.set_learning_rate(0.01)
    buffer = ReplayBuffer(capacity=64, seed=0)
    for i in range(64):
        action = i % 2
        buffer.insert(
            observation=np.array([i / 64], np.float32),
            action=action,
            reward=1.0 + action,
            next_observation=np.array([0.0], np.float32),
            done=False,
        )
    for _ in range(40):
        learner.train_phase(buffer.sample(32 * 10), batch_size=32)
    with torch.no_grad():
        q = learner.online(torch.linspace(0, 1, 9).unsqueeze(1))
    assert q[:, 0].numpy() == pytest.approx(np.ones(9), abs=0.05)
    assert q[:, 1].numpy() == pytest.approx(np.full(9, 2.0), abs=0.05)
    assert learner.n_updates == 400


def test_statistics_are_means_since_the_last_read() -> None:
    learner = linear_learner([0.0, 0.0], [0.0, 0.0], double_q=False, gamma=0.0)
    assert learner.pop_stats() == {}
    buffer = ReplayBuffer(capacity=8, seed=0)
    for _ in range(8):
        buffer.insert(
            observation=np.array([1.0], np.float32),
            action=0,
            reward=2.0,
            next_observation=np.array([1.0], np.float32),
            done=False,
        )
    learner.train_phase(buffer.sample(8), batch_size=8)
    stats = learner.pop_stats()
    # Q = 0 against targets of 2: Huber loss 1.5; the gradients of w[0] and b[0] are both -1.
    assert stats == {
        "train/loss": pytest.approx(1.5),
        "train/q_mean": 0.0,
        "train/grad_norm": pytest.approx(2**0.5),
    }
    assert learner.pop_stats() == {}


def test_unknown_loss_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"agent.loss='l1' is not valid; choose one of huber, mse"):
        make_learner(MLPQNetwork(1, 2, [], "relu", False), loss="l1")


@pytest.mark.parametrize("activation", ["relu", "tanh", "elu", "silu", "leaky_relu"])
@pytest.mark.parametrize("dueling", [False, True])
def test_numpy_q_values_match_the_network_and_follow_its_updates(activation: str, dueling: bool) -> None:
    torch.manual_seed(0)
    network = MLPQNetwork(3, 4, [16, 8], activation, dueling)
    numpy_q_values = network.numpy_q_values()
    assert numpy_q_values is not None
    obs = np.random.default_rng(0).normal(size=(32, 3)).astype(np.float32)
    with torch.no_grad():
        expected = network(torch.from_numpy(obs)).numpy()
        np.testing.assert_allclose(numpy_q_values(obs), expected, rtol=1e-5, atol=1e-5)
        for p in network.parameters():
            p.mul_(-2.0)  # in place, as the optimizer updates them
        np.testing.assert_allclose(
            numpy_q_values(obs), network(torch.from_numpy(obs)).numpy(), rtol=1e-5, atol=1e-5
        )


def test_gelu_networks_act_through_torch() -> None:
    assert MLPQNetwork(3, 4, [16], "gelu", False).numpy_q_values() is None
    learner = make_learner(MLPQNetwork(3, 4, [16], "gelu", False))
    obs = np.ones((2, 3), np.float32)
    with torch.no_grad():
        assert learner.greedy(obs).tolist() == learner.online(torch.from_numpy(obs)).argmax(1).tolist()
