"""The 8 symmetries of a square board (4 rotations, each optionally mirrored), as index tables.

`index[k]` maps a transformed board to the original: `transformed = original[..., index[k]]` for
any array whose last axis is the flat board (stones, a policy over actions, flattened planes).
The identity is k = 0. `inverse[k]` undoes it.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

N_SYMMETRIES = 8


@lru_cache(maxsize=16)
def tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(index, inverse): two int64 arrays of shape [8, size*size]."""
    cells = np.arange(size * size).reshape(size, size)
    index = np.stack(
        [np.rot90(np.fliplr(cells) if k >= 4 else cells, k % 4).ravel() for k in range(N_SYMMETRIES)]
    )
    inverse = np.argsort(index, axis=1)
    index.setflags(write=False)
    inverse.setflags(write=False)
    return index, inverse


def transform_planes(planes: np.ndarray, k: int) -> np.ndarray:
    """Planes [..., C, n, n] under symmetry k."""
    size = planes.shape[-1]
    index, _ = tables(size)
    flat = planes.reshape(*planes.shape[:-2], size * size)
    return flat[..., index[k]].reshape(planes.shape)


def transform_policy(policy: np.ndarray, k: int, size: int) -> np.ndarray:
    """A policy (or any array over actions) [..., n*n] under symmetry k."""
    index, _ = tables(size)
    return policy[..., index[k]]


def transform_action(action: int, k: int, size: int) -> int:
    """Where the cell `action` goes under symmetry k."""
    _, inverse = tables(size)
    return int(inverse[k, action])
