"""ReplayBuffer: a circular buffer of whole transitions, sampled uniformly."""

from __future__ import annotations

from collections.abc import Mapping

# Optional[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import numpy as np

from .config import ReplayBufferConfig
from .storage import (
    Columns,
    check_batch_size,
    check_matches,
    check_positions,
    positive,
    rng_from_state,
    rng_state,
    state_int,
    transition_values,
)

#: Output key of each field → the insert() argument it comes from.
FIELDS = {
    "observations": "observation",
    "actions": "action",
    "rewards": "reward",
    "next_observations": "next_observation",
    "dones": "done",
}
INSERT_FIELDS = tuple(FIELDS.values())


class ReplayBuffer:
    """Circular replay buffer of (observation, action, reward, next observation, done), sampled uniformly.

    Arrays are allocated on the first insert from that transition's shapes and dtypes.
    """

    Config: ClassVar[type] = ReplayBufferConfig

    def __init__(
        self,
        cfg: Optional[ReplayBufferConfig] = None,
        *,
        capacity: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> None:
        cfg = cfg if cfg is not None else ReplayBufferConfig()
        self.capacity = positive("buffer.capacity", cfg.capacity if capacity is None else capacity)
        self._columns = Columns("ReplayBuffer", FIELDS, self.capacity)
        self._batch: dict[str, np.ndarray] = {}  # output arrays, allocated once per batch size
        self._batch_size = -1
        self._rng = np.random.default_rng(seed)
        self._size = 0
        self._next = 0  # the slot the next insert writes

    def seed(self, seed: int) -> None:
        """Reseed the sampling generator."""
        self._rng = np.random.default_rng(seed)

    def insert(self, /, **transition: Any) -> None:
        """Store one transition: observation, action, reward, next_observation, done (= terminated:
        no bootstrapping from next_observation)."""
        self._columns.write(self._next, transition_values("ReplayBuffer", transition, INSERT_FIELDS))
        self._next = (self._next + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """Bytes held by the stored arrays."""
        return self._columns.nbytes

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """A batch drawn uniformly (with replacement); the arrays are reused by the next sample()."""
        batch_size = check_batch_size("ReplayBuffer", batch_size, self._size)
        return self._gather(self._rng.integers(0, self._size, size=batch_size))

    def gather(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        """Transitions at `positions`, 0 being the oldest stored and len-1 the newest."""
        return self._gather(check_positions("ReplayBuffer", positions, self._size))

    def _gather(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        slots = (positions + (self._next if self._size == self.capacity else 0)) % self.capacity
        if self._batch_size != len(slots):
            self._batch = {key: self._columns.empty_like(key, (len(slots),)) for key in FIELDS}
            self._batch_size = len(slots)
        for key in FIELDS:
            self._columns.take(key, slots, self._batch[key])
        return self._batch

    def state_dict(self) -> dict[str, Any]:
        """Counters, the sampling generator and the stored rows (views: save them before inserting more)."""
        return {
            "capacity": self.capacity,
            "size": self._size,
            "next": self._next,
            "rng": rng_state(self._rng),
            **self._columns.state(self._size),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what state_dict() returned (also after np.savez / np.load)."""
        check_matches("ReplayBuffer", state, capacity=self.capacity)
        size, position = state_int("ReplayBuffer", state, "size"), state_int("ReplayBuffer", state, "next")
        # Until the buffer is full, the next slot is the first free one.
        if not 0 <= position < self.capacity or not (size == self.capacity or position == size):
            raise ValueError(f"ReplayBuffer.load_state_dict: size={size}, next={position} do not fit")
        self._columns.load(state, size)
        self._batch, self._batch_size = {}, -1
        self._size, self._next = size, position
        self._rng = rng_from_state(state["rng"])


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import Buffer

    _replaybuffer_contract: type[Buffer] = ReplayBuffer
