"""How the agent writes to its replay buffer: whole transitions (over one step or n), or one frame
per step."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from framework import registry
from framework.contracts import Buffer, FrameBuffer
from framework.errors import ConfigError


class Replay(Protocol):
    @property
    def buffer(self) -> Buffer: ...

    def start(self, index: int, obs: np.ndarray) -> None: ...
    def add(
        self, index: int, obs: np.ndarray, action: Any, reward: float, next_obs: np.ndarray, terminated: bool
    ) -> None: ...


class TransitionReplay:
    """A buffer of whole (observation, action, reward, next observation, terminated) transitions."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer

    def start(self, index: int, obs: np.ndarray) -> None:
        """Episodes need no marking: each transition carries both its observations."""

    def add(
        self, index: int, obs: np.ndarray, action: Any, reward: float, next_obs: np.ndarray, terminated: bool
    ) -> None:
        self.buffer.insert(
            observation=obs, action=action, reward=reward, next_observation=next_obs, done=terminated
        )


class NStepReplay:
    """Transitions over n env steps: (s_t, a_t, r_t + γ·r_t+1 + … + γ^(n−1)·r_t+n−1, s_t+n, done), so
    the TD target bootstraps with γ^n. Near a termination the shorter sums end with done=True;
    the last n − 1 steps of a truncated episode, which would need γ^k for k < n, are not stored."""

    def __init__(self, buffer: Buffer, *, n: int, gamma: float, n_envs: int) -> None:
        self.buffer = buffer
        self.n = n
        self.discounts = [gamma**k for k in range(n)]
        self.windows: list[deque[tuple[np.ndarray, Any, float]]] = [deque() for _ in range(n_envs)]

    def start(self, index: int, obs: np.ndarray) -> None:
        self.windows[index].clear()  # what is left of a truncated episode

    def add(
        self, index: int, obs: np.ndarray, action: Any, reward: float, next_obs: np.ndarray, terminated: bool
    ) -> None:
        window = self.windows[index]
        window.append((obs, action, reward))
        if terminated:
            while window:
                self._insert(window, next_obs, True)
                window.popleft()
        elif len(window) == self.n:
            self._insert(window, next_obs, False)
            window.popleft()

    def _insert(self, window: deque[tuple[np.ndarray, Any, float]], next_obs: np.ndarray, done: bool) -> None:
        ret = sum(d * r for d, (_, _, r) in zip(self.discounts, window, strict=False))
        obs, action, _ = window[0]
        self.buffer.insert(
            observation=obs, action=action, reward=float(ret), next_observation=next_obs, done=done
        )


class FrameReplay:
    """A buffer that stores each frame once and stacks them itself: it gets the newest frame of
    each (frames, H, W) observation; on_reset at every episode start ends the previous one."""

    def __init__(self, buffer: FrameBuffer) -> None:
        self.buffer: FrameBuffer = buffer

    def start(self, index: int, obs: np.ndarray) -> None:
        self.buffer.on_reset(obs[-1])

    def add(
        self, index: int, obs: np.ndarray, action: Any, reward: float, next_obs: np.ndarray, terminated: bool
    ) -> None:
        self.buffer.insert(action=action, reward=reward, next_frame=next_obs[-1], done=terminated)


def check_buffer(selected: Buffer | None, *, buffer_size: int, n_envs: int, n_step: int) -> None:
    """Refuse a buffer this agent's settings cannot fill (before the run starts, where it can)."""
    if selected is None:
        return
    if selected.capacity != buffer_size:
        raise ConfigError(
            f"agent.buffer_size={buffer_size} but the selected buffer has "
            f"buffer.capacity={selected.capacity}: the selected buffer's capacity is the one that counts "
            "(agent.buffer_size follows it in conf/agent/dqn.yaml); set buffer.capacity instead"
        )
    if not isinstance(selected, FrameBuffer):
        return
    name = type(selected).__name__
    if n_step > 1:
        raise ConfigError(
            f"agent.n_step={n_step} needs a buffer of whole transitions (buffer=replay), not {name} "
            "(buffer=memory_efficient), which stores frames one step at a time"
        )
    if n_envs != 1:
        raise ConfigError(f"{name} keeps one trajectory at a time: it needs env.n_envs=1, not {n_envs}")


def make_replay(
    selected: Buffer | None,
    *,
    buffer_size: int,
    obs_shape: tuple[int, ...],
    n_envs: int,
    seed: int,
    n_step: int = 1,
    gamma: float = 1.0,
) -> Replay:
    """The run's selected buffer (`buffer=...`), else a ReplayBuffer of `buffer_size` from the registry."""
    check_buffer(selected, buffer_size=buffer_size, n_envs=n_envs, n_step=n_step)
    if selected is None:
        replay = registry.load("buffer", "replay")
        buffer: Buffer = replay(replay.Config(capacity=buffer_size))
    else:
        buffer = selected
    buffer.seed(seed)
    if not isinstance(buffer, FrameBuffer):
        return (
            NStepReplay(buffer, n=n_step, gamma=gamma, n_envs=n_envs)
            if n_step > 1
            else TransitionReplay(buffer)
        )
    check_frames(buffer, obs_shape)
    return FrameReplay(buffer)


def check_frames(buffer: Buffer | None, obs_shape: Sequence[int]) -> None:
    """A buffer that stacks frames refuses observations that are not as many frames stacked."""
    if not isinstance(buffer, FrameBuffer):
        return
    k = int(buffer.frame_history_len)
    if len(obs_shape) != 3 or obs_shape[0] != k:
        raise ConfigError(
            f"{type(buffer).__name__} (buffer=memory_efficient) stores image frames and stacks "
            f"buffer.frame_history_len={k} of them: it needs observations of {k} stacked frames shaped "
            f"({k}, H, W), and this env gives {tuple(obs_shape)}. Use buffer=replay, or an env of frames "
            "with as many stacked (env=atari: env.frame_stack=2 or more)"
        )
