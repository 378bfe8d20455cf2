"""Storage shared by the replay buffers: typed circular columns, value checks and checkpoint state."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Python scalars become these dtypes; numpy values keep their own.
SCALAR_DTYPES: dict[type, type] = {bool: np.bool_, int: np.int64, float: np.float32}


def as_array(value: Any) -> np.ndarray:
    """`value` as an array: python scalars by SCALAR_DTYPES, numpy values with their dtype."""
    dtype = SCALAR_DTYPES.get(type(value))
    return np.asarray(value, dtype=dtype)


def shape_of(value: Any) -> tuple[int, ...]:
    """The shape `value` would have as an array (python scalars without converting them)."""
    if type(value) in SCALAR_DTYPES:
        return ()
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else np.shape(value)


#: (value kind, column kind) pairs that numpy would store by silently dropping information.
LOSSY = {(v, c) for v in "fc" for c in "biu"} | {("c", "f")}


def _kind(value: Any) -> str:
    if type(value) is float:
        return "f"
    dtype = getattr(value, "dtype", None)
    return str(dtype.kind) if dtype is not None else as_array(value).dtype.kind


def _scalar_types(value: Any) -> set[type]:
    """{type(value)} when every value of that type has the same shape and dtype kind, else {}."""
    return {type(value)} if type(value) in SCALAR_DTYPES or isinstance(value, np.generic) else set()


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value >= 1)


def transition_values(owner: str, transition: Mapping[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
    """The values of `transition` in the order of `names`; a TypeError unless it has exactly those keys."""
    if len(transition) == len(names) and all(name in transition for name in names):
        return tuple([transition[name] for name in names])
    missing = [n for n in names if n not in transition]
    unexpected = [k for k in transition if k not in names]
    problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
        [f"unexpected {', '.join(unexpected)}"] if unexpected else []
    )
    raise TypeError(f"{owner}.insert() takes {', '.join(names)} by name ({'; '.join(problems)})")


def positive(key: str, value: Any) -> int:
    """`value` as an int >= 1, or a ValueError naming `key`."""
    if not _is_count(value):
        raise ValueError(f"{key}={value!r} is not valid: it must be an integer >= 1")
    return int(value)


def check_batch_size(owner: str, batch_size: Any, stored: int) -> int:
    """A batch size of at least 1 from a buffer that holds transitions."""
    if not _is_count(batch_size):
        raise ValueError(
            f"{owner}.sample: batch_size={batch_size!r} is not valid: it must be an integer >= 1"
        )
    if stored == 0:
        raise RuntimeError(f"{owner}.sample: the buffer is empty; insert transitions before sampling")
    return int(batch_size)


def check_positions(owner: str, positions: Any, stored: int) -> np.ndarray:
    """Integer positions in [0, stored), or an IndexError naming the range."""
    positions = np.asarray(positions)
    if positions.ndim != 1 or positions.dtype.kind not in "iu":
        raise IndexError(
            f"{owner}.gather: positions must be a 1-d integer array, got {positions.dtype} {positions.shape}"
        )
    if positions.size and not 0 <= positions.min() <= positions.max() < stored:
        raise IndexError(
            f"{owner}.gather: positions {positions.min()}..{positions.max()} are outside [0, {stored})"
        )
    return positions


class Columns:
    """Named circular arrays of one length, allocated on the first write from that row's values.

    Each column's shape and dtype come from its first value (python scalars: float32, bool,
    int64; numpy values keep their dtype). Later rows must have the same shape, and a float
    may not go into an integer or bool column, so nothing is silently truncated.
    """

    def __init__(self, owner: str, columns: Mapping[str, str], length: int) -> None:
        self.owner = owner
        #: Output key of each column → the argument name used in error messages.
        self.labels = dict(columns)
        self.length = length
        self.arrays: dict[str, np.ndarray] = {}
        self._ordered: list[np.ndarray] = []
        self._specs: list[tuple[set[type], tuple[int, ...], np.dtype, str]] = []

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def allocate(self, values: Sequence[Any]) -> None:
        """One array per column, shaped (length, *value shape), for the values of the first row."""
        firsts = [as_array(v) for v in values]
        self.arrays = {
            key: np.empty((self.length, *first.shape), dtype=first.dtype)
            for key, first in zip(self.labels, firsts, strict=True)
        }
        self._ordered = list(self.arrays.values())
        # Per column: scalar types known to fit, row shape, dtype, key.
        self._specs = [
            (_scalar_types(v), a.shape[1:], a.dtype, key)
            for v, (key, a) in zip(values, self.arrays.items(), strict=True)
        ]

    def check(self, values: Sequence[Any]) -> None:
        """A ValueError naming the argument when a value does not fit its column."""
        for spec, value in zip(self._specs, values, strict=True):
            # Fast paths: the first value's scalar type, or an array of the column's shape and dtype.
            kind = type(value)
            if kind in spec[0] or (kind is np.ndarray and value.shape == spec[1] and value.dtype == spec[2]):
                continue
            self._check_one(spec[3], value)
            spec[0].update(_scalar_types(value))

    def _check_one(self, key: str, value: Any) -> None:
        column = self.arrays[key]
        if shape_of(value) != column.shape[1:]:
            raise ValueError(
                f"{self.owner}: {self.labels[key]} has shape {shape_of(value)}, expected "
                f"{column.shape[1:]} (the shape of the first one inserted)"
            )
        if (_kind(value), column.dtype.kind) in LOSSY:
            raise ValueError(
                f"{self.owner}: {self.labels[key]}={value!r} does not fit the stored dtype "
                f"{column.dtype} (set by the first one inserted); insert {column.dtype} values"
            )

    def write(self, row: int, values: Sequence[Any]) -> None:
        """Check `values`, then store them at `row` (allocating the columns on the first write)."""
        if not self._ordered:
            self.allocate(values)
        self.check(values)
        for column, value in zip(self._ordered, values, strict=True):
            column[row] = value

    def empty_like(self, key: str, lead: tuple[int, ...]) -> np.ndarray:
        """An output array for rows of column `key` gathered with indices of shape `lead`."""
        column = self.arrays[key]
        return np.empty((*lead, *column.shape[1:]), dtype=column.dtype)

    def take(self, key: str, rows: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Rows of column `key` into `out` (indices must be in range: 'clip' skips numpy's buffering)."""
        return np.take(self.arrays[key], rows, axis=0, out=out, mode="clip")

    def state(self, rows: int) -> dict[str, np.ndarray]:
        """The first `rows` rows of every column (views, not copies)."""
        return {key: column[:rows] for key, column in self.arrays.items()}

    def load(self, state: Mapping[str, Any], rows: int) -> None:
        """Columns rebuilt from `state` (as `state` wrote it); nothing allocated when `rows` is 0."""
        self.arrays, self._ordered, self._specs = {}, [], []
        if rows == 0:
            return
        missing = [key for key in self.labels if key not in state]
        if missing:
            raise ValueError(f"{self.owner}.load_state_dict: the state has no {', '.join(missing)}")
        saved = [np.asarray(state[key]) for key in self.labels]
        for key, array in zip(self.labels, saved, strict=True):
            if len(array) != rows:
                raise ValueError(
                    f"{self.owner}.load_state_dict: {key} has {len(array)} rows, expected {rows}"
                )
        self.allocate([array[0] for array in saved])
        for column, array in zip(self._ordered, saved, strict=True):
            column[:rows] = array


#: numpy bit generators whose state rng_from_state restores.
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def rng_state(rng: np.random.Generator) -> str:
    """The generator's full state as JSON text (savable without pickle)."""
    return json.dumps(rng.bit_generator.state)


def rng_from_state(text: Any) -> np.random.Generator:
    """A generator continuing exactly where the one that wrote `text` (rng_state) stopped."""
    state = json.loads(str(text))
    if state.get("bit_generator") not in BIT_GENERATORS:
        raise ValueError(f"Unknown bit generator {state.get('bit_generator')!r}; known: {BIT_GENERATORS}")
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def state_int(owner: str, state: Mapping[str, Any], key: str) -> int:
    """An integer entry of a state dict, as written or as read back by np.load (a 0-d array)."""
    if key not in state:
        raise ValueError(f"{owner}.load_state_dict: the state has no {key!r}; was it written by {owner}?")
    return int(state[key])


def check_matches(owner: str, state: Mapping[str, Any], **mine: int) -> None:
    """The state was written by a buffer with the same structural settings as this one."""
    for key, value in mine.items():
        saved = state_int(owner, state, key)
        if saved != value:
            raise ValueError(
                f"{owner}.load_state_dict: the state is from a buffer with {key}={saved}, "
                f"this buffer has {key}={value}; build it with {key}={saved} to load this state"
            )
