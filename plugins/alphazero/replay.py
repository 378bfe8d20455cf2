"""The replay of self-play positions: (planes, search policy π, outcome z), sampled under symmetries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: (index tables [8, A] of the board's symmetries): see framework_plugins.gomoku.symmetries.
SymmetryTables = Callable[[int], tuple[np.ndarray, np.ndarray]]


class PositionReplay:
    """A circular store of positions; `sample` applies a random board symmetry to each one.

    Planes are stored as uint8 (they are 0/1), 4x smaller than float32.
    """

    def __init__(
        self, capacity: int, planes_shape: tuple[int, ...], n_actions: int, symmetry_index: np.ndarray
    ) -> None:
        self.capacity = capacity
        self.planes = np.zeros((capacity, *planes_shape), dtype=np.uint8)
        self.policy = np.zeros((capacity, n_actions), dtype=np.float32)
        self.value = np.zeros(capacity, dtype=np.float32)
        self.symmetry_index = symmetry_index
        """[S, A]: symmetry k maps a flat board b to b[..., symmetry_index[k]]."""
        self.size = 0
        self.next = 0
        self.added = 0
        """Positions ever added."""

    def __len__(self) -> int:
        return self.size

    def add(self, planes: np.ndarray, policy: np.ndarray, value: np.ndarray) -> None:
        for i in range(len(planes)):
            j = self.next
            self.planes[j] = planes[i]
            self.policy[j] = policy[i]
            self.value[j] = value[i]
            self.next = (j + 1) % self.capacity
        self.size = min(self.size + len(planes), self.capacity)
        self.added += len(planes)

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(planes float32 [B, C, n, n], policy [B, A], value [B]), each under a random symmetry."""
        rows = rng.integers(self.size, size=batch_size)
        index = self.symmetry_index[rng.integers(len(self.symmetry_index), size=batch_size)]  # [B, A]
        planes = self.planes[rows]
        b, c = planes.shape[:2]
        flat = planes.reshape(b, c, -1)
        planes = np.take_along_axis(flat, index[:, None, :], axis=2).reshape(planes.shape)
        policy = np.take_along_axis(self.policy[rows], index, axis=1)
        return planes.astype(np.float32), policy, self.value[rows].copy()

    def state_dict(self) -> dict[str, Any]:
        order = (np.arange(self.size) + (self.next - self.size)) % self.capacity  # oldest first
        return {"planes": self.planes[order], "policy": self.policy[order], "value": self.value[order]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        planes, policy, value = state["planes"], state["policy"], state["value"]
        keep = min(len(planes), self.capacity)
        self.size = self.next = 0
        self.add(planes[-keep:], policy[-keep:], value[-keep:])
        self.next %= self.capacity
