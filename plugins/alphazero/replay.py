"""The replay of self-play positions: (planes, search policy π, outcome z), sampled under symmetries."""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np


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
        n = len(planes)
        keep = min(n, self.capacity)  # more than the ring holds: its last `capacity` positions
        rows = (self.next + (n - keep) + np.arange(keep)) % self.capacity
        self.planes[rows] = planes[n - keep :]
        self.policy[rows] = policy[n - keep :]
        self.value[rows] = value[n - keep :]
        self.next = (self.next + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.added += n

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(planes float32 [B, C, n, n], policy [B, A], value [B]), each under a random symmetry."""
        rows = rng.integers(self.size, size=batch_size)
        symmetries = rng.integers(len(self.symmetry_index), size=batch_size)
        planes = np.empty((batch_size, *self.planes.shape[1:]), dtype=np.float32)
        policy = np.empty((batch_size, self.policy.shape[1]), dtype=np.float32)
        value = np.empty(batch_size, dtype=np.float32)
        n = len(rows)
        _gather(
            self.planes.reshape(self.capacity, self.planes.shape[1], -1),
            self.policy,
            self.value,
            rows,
            self.symmetry_index[symmetries],
            planes.reshape(n, planes.shape[1], -1),
            policy,
            value,
        )
        return planes, policy, value

    def state_dict(self) -> dict[str, Any]:
        order = (np.arange(self.size) + (self.next - self.size)) % self.capacity  # oldest first
        return {"planes": self.planes[order], "policy": self.policy[order], "value": self.value[order]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        planes, policy, value = state["planes"], state["policy"], state["value"]
        keep = min(len(planes), self.capacity)
        self.size = self.next = 0
        self.add(planes[-keep:], policy[-keep:], value[-keep:])
        self.next %= self.capacity


@nb.njit(cache=True, nogil=True)
def _gather(
    planes: np.ndarray,
    policy: np.ndarray,
    value: np.ndarray,
    rows: np.ndarray,
    index: np.ndarray,
    out_planes: np.ndarray,
    out_policy: np.ndarray,
    out_value: np.ndarray,
) -> None:
    """Row rows[b] under the symmetry index[b] (a flat board b -> b[index[b]]) into out[b]; without
    the GIL, so that a trainer thread's batches leave self-play's Python alone (numpy's fancy
    indexing of the same took 2 ms a batch of 256 15x15 positions here)."""
    for b in range(len(rows)):
        r = rows[b]
        for c in range(planes.shape[1]):
            for a in range(planes.shape[2]):
                out_planes[b, c, a] = planes[r, c, index[b, a]]
        for a in range(policy.shape[1]):
            out_policy[b, a] = policy[r, index[b, a]]
        out_value[b] = value[r]
