"""A counting env and a RunContext builder, so the DQN agent can be driven without the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from omegaconf import OmegaConf

from framework.checkpoint import Checkpointer
from framework.context import RunContext
from framework.progress import ProgressDisplay
from framework_plugins.buffers.replay import ReplayBuffer
from framework_plugins.dqn.agent import DQNAgent, DQNConfig


class CountingEnv(gym.Env):
    """Observation [t]: the step count within the episode; reward 1 per step; terminates at
    `terminate_at` (if set). Wrapped in a TimeLimit, episodes are truncated after `max_steps`."""

    observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)

    def __init__(self, terminate_at: int | None, n_actions: int) -> None:
        self.terminate_at = terminate_at
        self.action_space = gym.spaces.Discrete(n_actions)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        assert self.action_space.contains(action), action
        self.t += 1
        return np.array([float(self.t)], np.float32), 1.0, self.t == self.terminate_at, False, {}


@dataclass
class CountingPlugin:
    """An env plugin of CountingEnv instances."""

    max_steps: int = 5
    terminate_at: int | None = None
    n_actions: int = 2
    n_envs: int = 1

    def make(self, *, seed: int, index: int, evaluation: bool = False, render_mode: Any = None) -> gym.Env:
        env = gym.wrappers.TimeLimit(CountingEnv(self.terminate_at, self.n_actions), self.max_steps)
        env.action_space.seed(seed)
        return env


@dataclass
class RecordingTracker:
    """Keeps every logged metric: {name: [(step, value), ...]}."""

    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    run_id: str = "test"

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.metrics.setdefault(key, []).append((step, value))


def make_ctx(
    env_plugin: Any,
    tmp_path: Path,
    *,
    total_steps: int,
    seed: int = 0,
    buffer: Any = None,
    start_step: int = 0,
) -> RunContext:
    """A RunContext without evaluation, checkpoints or progress output."""
    cfg = OmegaConf.create({"eval": {"every_steps": 0, "episodes": 1, "deterministic": True}})
    return RunContext(
        cfg=cfg,
        env_plugin=env_plugin,
        seed=seed,
        rng=np.random.default_rng(seed),
        device="cpu",
        total_steps=total_steps,
        tracker=RecordingTracker(),  # type: ignore[arg-type]
        checkpointer=Checkpointer(tmp_path / "checkpoints", every_steps=0, keep=1, config_yaml=""),
        progress=ProgressDisplay(total_steps, mode="off", start=start_step),
        run_dir=tmp_path,
        start_step=start_step,
        buffer=buffer,
    )


def trained_agent(
    env_plugin: Any, tmp_path: Path, *, total_steps: int, buffer: Any = None, **cfg: Any
) -> tuple[DQNAgent, RunContext]:
    """An agent after `learn` on `env_plugin` for `total_steps`."""
    agent = DQNAgent(DQNConfig(**cfg))
    buffer = buffer if buffer is not None else ReplayBuffer(capacity=agent.cfg.buffer_size)
    ctx = make_ctx(env_plugin, tmp_path, total_steps=total_steps, buffer=buffer)
    agent.learn(ctx)
    return agent, ctx
