"""Tests of the replay buffer plugins, and the uniformity statistic they share."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

B = TypeVar("B")

#: Standard normal quantile of the upper tail probability 1e-6: a fair sampler fails one run in a million.
Z_ONE_IN_A_MILLION = 4.753


def chi_square(counts: np.ndarray) -> float:
    """Pearson's statistic of `counts` against equal expected counts in every cell."""
    expected = counts.sum() / len(counts)
    return float(((counts - expected) ** 2 / expected).sum())


def chi_square_limit(cells: int, z: float = Z_ONE_IN_A_MILLION) -> float:
    """Upper critical value of chi-square with cells-1 degrees of freedom (Wilson–Hilferty)."""
    df = cells - 1
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def assert_uniform(drawn: np.ndarray, cells: int) -> None:
    """`drawn` (values 0..cells-1) looks uniform: every cell hit, chi-square below its limit."""
    counts = np.bincount(drawn, minlength=cells)
    assert len(counts) == cells, f"values outside 0..{cells - 1}"
    assert counts.min() > 0, f"cells never drawn: {np.flatnonzero(counts == 0).tolist()}"
    assert chi_square(counts) < chi_square_limit(cells), (chi_square(counts), chi_square_limit(cells))


def reload_through_npz(buffer: Any, fresh: B, path: Path) -> B:
    """`fresh` after loading `buffer`'s state_dict saved with np.savez and read back (without pickle)."""
    np.savez(path, **buffer.state_dict())
    with np.load(path, allow_pickle=False) as saved:
        fresh.load_state_dict(dict(saved))  # type: ignore[attr-defined]
    return fresh


def assert_same_transitions(a: Any, b: Any, positions: np.ndarray) -> None:
    """Both buffers hold the same transitions at `positions` (0 = oldest), field by field."""
    expected = {key: value.copy() for key, value in a.gather(positions).items()}
    for key, value in b.gather(positions).items():
        np.testing.assert_array_equal(value, expected[key], err_msg=key)
