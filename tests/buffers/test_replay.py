"""ReplayBuffer: circular storage, lazy typed arrays, uniform sampling and checkpoint state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from framework_plugins.buffers.replay import ReplayBuffer, ReplayBufferConfig
from tests.buffers import (
    assert_same_transitions,
    assert_uniform,
    chi_square,
    chi_square_limit,
    reload_through_npz,
)


def fill(buffer: ReplayBuffer, n: int, start: int = 0) -> None:
    """Insert transitions numbered start..start+n-1; every field is derived from the number."""
    for i in range(start, start + n):
        buffer.insert(
            observation=np.array([i, -i], dtype=np.float32),
            action=i % 3,
            reward=0.5 * i,
            next_observation=np.array([i + 1, -i - 1.0]),
            done=i % 4 == 0,
        )


def test_len_caps_at_capacity_and_the_oldest_are_overwritten() -> None:
    buffer = ReplayBuffer(capacity=5)
    fill(buffer, 3)
    assert len(buffer) == 3
    fill(buffer, 9, start=3)
    assert len(buffer) == 5
    batch = buffer.gather(np.arange(5))
    kept = np.arange(7, 12)  # the newest five of 0..11, oldest first
    np.testing.assert_array_equal(batch["observations"], np.stack([kept, -kept], axis=1))
    np.testing.assert_array_equal(batch["actions"], kept % 3)
    np.testing.assert_array_equal(batch["rewards"], 0.5 * kept)
    np.testing.assert_array_equal(batch["next_observations"], np.stack([kept + 1, -kept - 1], axis=1))
    np.testing.assert_array_equal(batch["dones"], kept % 4 == 0)


def test_arrays_are_allocated_on_the_first_insert_with_its_shapes_and_dtypes() -> None:
    buffer = ReplayBuffer(capacity=7)
    assert buffer.nbytes == 0
    observation = np.zeros((2, 3), dtype=np.uint8)
    buffer.insert(
        observation=observation,
        action=np.array([0.1, 0.2], dtype=np.float64),
        reward=np.float16(1),
        next_observation=observation,
        done=np.bool_(1),
    )
    batch = buffer.sample(4)
    assert batch["observations"].shape == (4, 2, 3) and batch["observations"].dtype == np.uint8
    assert batch["actions"].shape == (4, 2) and batch["actions"].dtype == np.float64
    assert batch["rewards"].shape == (4,) and batch["rewards"].dtype == np.float16
    assert batch["next_observations"].dtype == np.uint8 and batch["dones"].dtype == np.bool_
    assert buffer.nbytes == 7 * (6 + 16 + 2 + 6 + 1)


def test_python_scalars_become_float32_int64_and_bool() -> None:
    buffer = ReplayBuffer(capacity=3)
    buffer.insert(observation=1.5, action=2, reward=0.25, next_observation=[1.0, 2.0], done=True)
    batch = buffer.gather(np.array([0]))
    dtypes = {key: value.dtype for key, value in batch.items()}
    assert dtypes == {
        "observations": np.float32,
        "actions": np.int64,
        "rewards": np.float32,
        "next_observations": np.float64,  # a list is not a scalar: numpy's own conversion
        "dones": np.bool_,
    }
    assert batch["observations"][0] == 1.5 and batch["actions"][0] == 2 and batch["dones"][0]


def test_a_transition_of_another_shape_is_refused_naming_the_field_and_both_shapes() -> None:
    buffer = ReplayBuffer(capacity=3)
    buffer.insert(observation=np.zeros(4), action=0, reward=0.0, next_observation=np.zeros(4), done=False)
    with pytest.raises(ValueError, match=r"next_observation has shape \(5,\), expected \(4,\)"):
        buffer.insert(observation=np.zeros(4), action=1, reward=1.0, next_observation=np.zeros(5), done=False)
    with pytest.raises(ValueError, match=r"action has shape \(2,\), expected \(\)"):
        buffer.insert(
            observation=np.zeros(4), action=[1, 2], reward=1.0, next_observation=np.zeros(4), done=False
        )
    assert len(buffer) == 1
    np.testing.assert_array_equal(buffer.gather(np.array([0]))["actions"], [0])


def test_a_float_into_an_integer_field_is_refused_instead_of_truncated() -> None:
    buffer = ReplayBuffer(capacity=3)
    buffer.insert(
        observation=np.zeros(2), action=0, reward=1, next_observation=np.zeros(2), done=False
    )  # an int reward makes the rewards int64
    with pytest.raises(ValueError, match=r"reward=0\.5 does not fit the stored dtype int64"):
        buffer.insert(observation=np.zeros(2), action=0, reward=0.5, next_observation=np.zeros(2), done=False)


def test_sampling_an_empty_buffer_or_a_batch_below_one_is_an_error() -> None:
    buffer = ReplayBuffer(capacity=3)
    with pytest.raises(RuntimeError, match="empty"):
        buffer.sample(1)
    fill(buffer, 1)
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match=f"batch_size={bad!r} is not valid"):
            buffer.sample(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("capacity", [0, -1, 2.5, "big"])
def test_capacity_must_be_a_positive_integer(capacity: object) -> None:
    with pytest.raises(ValueError, match=f"buffer.capacity={capacity!r} is not valid"):
        ReplayBuffer(ReplayBufferConfig(capacity=capacity))  # type: ignore[arg-type]


def test_sampling_is_uniform_over_stored_transitions_after_wraparound() -> None:
    capacity, inserted, draws = 50, 75, 100_000
    buffer = ReplayBuffer(capacity=capacity, seed=1)
    fill(buffer, inserted)
    # Observation i names transition i; the stored ones are 25..74.
    drawn = np.concatenate(
        [buffer.sample(500)["observations"][:, 0].astype(int) for _ in range(draws // 500)]
    )
    assert_uniform(drawn - (inserted - capacity), capacity)


def test_the_uniformity_check_rejects_the_known_biased_samplers() -> None:
    """The statistic used above does fail the two classic bugs, at the same sizes."""
    capacity, inserted, draws = 50, 75, 100_000
    rng = np.random.default_rng(1)
    modulo = rng.integers(0, inserted, size=draws) % capacity  # randint(0, size) % max_size
    never_newest = rng.integers(0, capacity - 1, size=draws)  # one stored transition never drawn
    limit = chi_square_limit(capacity)
    assert chi_square(np.bincount(modulo, minlength=capacity)) > limit
    assert chi_square(np.bincount(never_newest, minlength=capacity)) > limit


def test_samples_reuse_their_arrays() -> None:
    buffer = ReplayBuffer(capacity=10, seed=0)
    fill(buffer, 10)
    first = buffer.sample(4)
    second = buffer.sample(4)
    assert all(second[key] is first[key] for key in first)
    assert buffer.sample(6)["observations"].shape == (6, 2)


def test_state_dict_round_trips_through_npz(tmp_path: Path) -> None:
    buffer = ReplayBuffer(capacity=8, seed=5)
    fill(buffer, 13)
    buffer.sample(3)  # the sampling generator has moved on from its seed
    restored = reload_through_npz(buffer, ReplayBuffer(capacity=8), tmp_path / "buffer.npz")

    assert len(restored) == len(buffer) == 8
    assert_same_transitions(buffer, restored, np.arange(8))
    # The generator's state travels with the buffer; reseeding both also agrees.
    np.testing.assert_array_equal(restored.sample(6)["observations"], buffer.sample(6)["observations"])
    buffer.seed(11)
    restored.seed(11)
    np.testing.assert_array_equal(restored.sample(6)["observations"], buffer.sample(6)["observations"])
    # The next insert overwrites the same (oldest) slot in both.
    fill(buffer, 1, start=100)
    fill(restored, 1, start=100)
    assert_same_transitions(buffer, restored, np.arange(8))
    assert restored.gather(np.array([7]))["observations"][0, 0] == 100


def test_an_empty_buffer_round_trips_and_a_capacity_mismatch_is_an_error() -> None:
    empty = ReplayBuffer(capacity=4)
    restored = ReplayBuffer(capacity=4)
    restored.load_state_dict(empty.state_dict())
    assert len(restored) == 0 and restored.nbytes == 0
    with pytest.raises(ValueError, match="capacity=4, this buffer has capacity=5"):
        ReplayBuffer(capacity=5).load_state_dict(empty.state_dict())
