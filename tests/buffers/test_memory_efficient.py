"""MemoryEfficientReplayBuffer: stacks rebuilt from frames exactly as FrameStackObservation builds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_plugins.buffers.memory_efficient import (
    MemoryEfficientReplayBuffer,
    MemoryEfficientReplayBufferConfig,
)
from tests.buffers import assert_same_transitions, assert_uniform, reload_through_npz

#: An episode: (steps, terminated); an episode that is not terminated ends truncated.
Episode = tuple[int, bool]


class NumberedFrames(gym.Env[np.ndarray, int]):
    """Scripted episodes whose every frame is [its number in order of emission, its episode]."""

    observation_space = gym.spaces.Box(0, 1 << 30, shape=(2,), dtype=np.int64)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, episodes: list[Episode]) -> None:
        self.episodes = episodes
        self.episode, self.t, self.frames = -1, 0, 0

    def _frame(self) -> np.ndarray:
        self.frames += 1
        return np.array([self.frames - 1, self.episode], dtype=np.int64)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        self.episode, self.t = self.episode + 1, 0
        return self._frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        steps, terminated = self.episodes[self.episode]
        last = self.t >= steps
        return self._frame(), float(action) - 0.5, last and terminated, last and not terminated, {}


FIELDS = ("observations", "actions", "rewards", "next_observations", "dones")


class Reference:
    """Every transition ever inserted, with the stacks FrameStackObservation produced for it."""

    def __init__(self) -> None:
        self.transitions: dict[str, list[Any]] = {name: [] for name in FIELDS}
        self.oldest_frame_shown: list[int] = []  # the oldest frame number in each transition's stacks

    def add(self, *transition: Any) -> None:
        for name, value in zip(FIELDS, transition, strict=True):
            self.transitions[name].append(value)
        observation, next_observation = transition[0], transition[3]
        self.oldest_frame_shown.append(int(min(observation[:, 0].min(), next_observation[:, 0].min())))

    def sampleable(self, capacity: int, frame_capacity: int, frames_written: int) -> int:
        """How many of the newest transitions are sampleable: among the newest `capacity`, and every
        frame their stacks show not yet overwritten (frame numbers before written - frame_capacity)."""
        overwritten_below = frames_written - frame_capacity
        intact = [oldest >= overwritten_below for oldest in self.oldest_frame_shown[-capacity:]]
        # Frames are overwritten oldest first, so the intact ones are a run ending at the newest.
        assert intact == sorted(intact)
        return sum(intact)

    def newest(self, n: int) -> dict[str, np.ndarray]:
        return {name: np.array(values[len(values) - n :]) for name, values in self.transitions.items()}


def assert_matches(buffer: MemoryEfficientReplayBuffer, reference: Reference, frames_written: int) -> None:
    stored = reference.sampleable(buffer.capacity, buffer.frame_capacity, frames_written)
    assert len(buffer) == stored
    if stored == 0:
        return
    expected = reference.newest(stored)
    batch = buffer.gather(np.arange(stored))
    for key, value in expected.items():
        assert np.array_equal(batch[key], value), (key, batch[key], value)
    # Every sampled transition is one of the stored ones, whole (frame numbers identify them).
    sample = buffer.sample(8)
    drawn = np.searchsorted(expected["observations"][:, -1, 0], sample["observations"][:, -1, 0])
    for key in ("observations", "next_observations"):
        assert np.array_equal(sample[key], expected[key][drawn]), key


def play(
    episodes: list[Episode], buffer: MemoryEfficientReplayBuffer, check: bool
) -> tuple[Reference, NumberedFrames]:
    """Run the episodes through FrameStackObservation, feeding the buffer as a DQN agent would."""
    frames = NumberedFrames(episodes)
    env = FrameStackObservation(frames, buffer.frame_history_len)
    reference = Reference()
    for steps, _ in episodes:
        observation, _ = env.reset()
        buffer.on_reset(observation[-1])  # may overwrite the frames of the oldest transitions
        if check:
            assert_matches(buffer, reference, frames.frames)
        for t in range(steps):
            action = (t * 7 + steps) % 3
            next_observation, reward, terminated, _, _ = env.step(action)
            buffer.insert(action=action, reward=reward, next_frame=next_observation[-1], done=terminated)
            reference.add(observation, action, float(reward), next_observation, terminated)
            observation = next_observation
            if check:
                assert_matches(buffer, reference, frames.frames)
    return reference, frames


episode_lengths = st.one_of(st.integers(0, 6), st.integers(7, 45))


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(5, 40),
    k=st.integers(1, 5),
    episodes=st.lists(st.tuples(episode_lengths, st.booleans()), min_size=1, max_size=25),
    seed=st.integers(0, 2**16),
)
def test_every_sampleable_transition_matches_frame_stack_observation(
    capacity: int, k: int, episodes: list[Episode], seed: int
) -> None:
    buffer = MemoryEfficientReplayBuffer(capacity=capacity, frame_history_len=k, seed=seed)
    play(episodes, buffer, check=True)


def numbered(n: int, shape: tuple[int, ...] = (84, 84)) -> list[np.ndarray]:
    """n uint8 frames; frame i is filled with i (mod 256)."""
    return [np.full(shape, i % 256, dtype=np.uint8) for i in range(n)]


def test_a_stack_repeats_the_first_frame_of_its_episode() -> None:
    buffer = MemoryEfficientReplayBuffer(capacity=10, frame_history_len=4)
    f = numbered(6, (2, 2))
    buffer.on_reset(f[0])
    for i in range(1, 4):
        buffer.insert(action=0, reward=0.0, next_frame=f[i], done=False)
    buffer.on_reset(f[4])
    buffer.insert(action=1, reward=1.0, next_frame=f[5], done=True)
    batch = buffer.gather(np.arange(4))
    newest_values = (
        batch["observations"][:, :, 0, 0].tolist(),
        batch["next_observations"][:, :, 0, 0].tolist(),
    )
    assert newest_values == (
        [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 2], [4, 4, 4, 4]],
        [[0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3], [4, 4, 4, 5]],
    )
    assert batch["observations"].dtype == np.uint8 and batch["observations"].shape == (4, 4, 2, 2)


def test_the_real_last_frame_of_a_truncated_episode_is_its_next_observation() -> None:
    buffer = MemoryEfficientReplayBuffer(capacity=10, frame_history_len=2)
    f = numbered(5, (1,))
    buffer.on_reset(f[0])
    buffer.insert(action=0, reward=0.0, next_frame=f[1], done=False)
    buffer.insert(
        action=0, reward=0.0, next_frame=f[2], done=False
    )  # the time limit ends the episode here: no done
    buffer.on_reset(f[3])
    buffer.insert(action=0, reward=0.0, next_frame=f[4], done=False)
    batch = buffer.gather(np.arange(3))
    assert batch["next_observations"][:, :, 0].tolist() == [[0, 1], [1, 2], [3, 4]]
    assert not batch["dones"].any()


def test_the_frame_index_wraps_and_memory_stays_one_frame_per_transition() -> None:
    capacity, k = 1000, 4
    buffer = MemoryEfficientReplayBuffer(capacity=capacity, frame_history_len=k, seed=0)
    frame_bytes = 84 * 84
    f = numbered(256)
    written = 0
    for episode in range(40):  # 40 episodes of 100 steps: 4,040 frames, over 4x the framebuffer
        buffer.on_reset(f[written % 256])
        written += 1
        for t in range(100):
            buffer.insert(
                action=t % 6, reward=1.0, next_frame=f[written % 256], done=t == 99 and episode % 2 == 0
            )
            written += 1
        # A framebuffer of capacity + a few frames, and a few bytes per transition besides.
        assert buffer.nbytes <= (capacity + 2 * k) * frame_bytes + 32 * capacity
    assert written > 4 * buffer.frame_capacity
    assert buffer.frame_capacity <= capacity + 2 * k
    # Episodes of 100 steps cost one extra frame each: about 1% fewer transitions than capacity.
    assert 0.98 * capacity <= len(buffer) <= capacity
    assert buffer.nbytes / len(buffer) <= 1.03 * frame_bytes + 32
    batch = buffer.sample(32)
    assert batch["observations"].shape == (32, k, 84, 84)
    # Each frame holds its number mod 256, so a stack of one episode counts up (or repeats its start).
    steps = np.diff(batch["observations"][:, :, 0, 0].astype(int), axis=1) % 256
    assert np.isin(steps, (0, 1)).all()


def test_transitions_are_dropped_when_short_episodes_overwrite_their_frames() -> None:
    buffer = MemoryEfficientReplayBuffer(capacity=20, frame_history_len=3)
    f = numbered(256, (1,))
    written = 0
    for _ in range(30):  # episodes of one step: two frames per transition
        buffer.on_reset(f[written % 256])
        buffer.insert(action=0, reward=0.0, next_frame=f[(written + 1) % 256], done=True)
        written += 2
    # Each stored transition needs its two frames among the frame_capacity newest.
    assert len(buffer) == buffer.frame_capacity // 2
    batch = buffer.gather(np.arange(len(buffer)))
    np.testing.assert_array_equal(batch["next_observations"][:, -1, 0], batch["observations"][:, -1, 0] + 1)


def test_sampling_is_uniform_over_stored_transitions_after_wraparound() -> None:
    buffer = MemoryEfficientReplayBuffer(capacity=40, frame_history_len=4, seed=3)
    reference, frames = play([(23, True), (2, False), (31, False), (9, True)], buffer, check=False)
    stored = reference.sampleable(buffer.capacity, buffer.frame_capacity, frames.frames)
    assert len(buffer) == stored == 40
    newest_frame = reference.newest(stored)["observations"][:, -1, 0]
    drawn = np.concatenate(
        [np.searchsorted(newest_frame, buffer.sample(500)["observations"][:, -1, 0]) for _ in range(160)]
    )
    assert_uniform(drawn, stored)


def test_inserting_out_of_order_or_of_another_shape_is_a_clear_error() -> None:
    buffer = MemoryEfficientReplayBuffer(capacity=5, frame_history_len=2)
    frame = np.zeros((3, 3), dtype=np.uint8)
    with pytest.raises(RuntimeError, match=r"insert before on_reset"):
        buffer.insert(action=0, reward=0.0, next_frame=frame, done=False)
    with pytest.raises(RuntimeError, match="empty"):
        buffer.sample(1)
    buffer.on_reset(frame)
    with pytest.raises(ValueError, match=r"frame has shape \(3, 4\), expected \(3, 3\)"):
        buffer.insert(action=0, reward=0.0, next_frame=np.zeros((3, 4), dtype=np.uint8), done=False)
    with pytest.raises(ValueError, match=r"frame has shape \(4, 3\), expected \(3, 3\)"):
        buffer.on_reset(np.zeros((4, 3), dtype=np.uint8))
    buffer.insert(action=0, reward=0.0, next_frame=frame, done=True)
    with pytest.raises(RuntimeError, match=r"after a transition with done=True: call on_reset"):
        buffer.insert(action=0, reward=0.0, next_frame=frame, done=False)
    with pytest.raises(ValueError, match="batch_size=0 is not valid"):
        buffer.sample(0)
    assert len(buffer) == 1


@pytest.mark.parametrize(
    ("key", "value"), [("capacity", 0), ("frame_history_len", 0), ("frame_history_len", 1.5)]
)
def test_config_values_must_be_positive_integers(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"buffer.{key}={value!r} is not valid"):
        MemoryEfficientReplayBuffer(MemoryEfficientReplayBufferConfig(**{key: value}))  # type: ignore[arg-type]


def test_state_dict_round_trips_through_npz(tmp_path: Path) -> None:
    episodes = [(30, True), (3, False), (17, False)]
    buffer = MemoryEfficientReplayBuffer(capacity=25, frame_history_len=4, seed=8)
    play(episodes, buffer, check=False)
    fresh = MemoryEfficientReplayBuffer(capacity=25, frame_history_len=4)
    restored = reload_through_npz(buffer, fresh, tmp_path / "buffer.npz")

    assert len(restored) == len(buffer) > 0
    assert_same_transitions(buffer, restored, np.arange(len(buffer)))
    np.testing.assert_array_equal(restored.sample(16)["observations"], buffer.sample(16)["observations"])
    # The trajectory under way goes on in both, into the same framebuffer slots.
    frame = np.array([999, 9], dtype=np.int64)
    for b in (buffer, restored):
        b.insert(action=1, reward=0.5, next_frame=frame, done=False)
    assert_same_transitions(buffer, restored, np.arange(len(buffer)))
    assert restored.gather(np.array([len(buffer) - 1]))["next_observations"][0, -1, 0] == 999
    with pytest.raises(ValueError, match="frame_history_len=4, this buffer has frame_history_len=3"):
        MemoryEfficientReplayBuffer(capacity=25, frame_history_len=3).load_state_dict(buffer.state_dict())
