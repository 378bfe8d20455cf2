"""Kernels over many trees on the run's CPU threads: each compiled twice, over numba's threads
(`prange` over a few contiguous parts of the trees a thread) and on the calling thread alone, which
a call with few trees takes (a parallel launch costs microseconds that a few trees do not repay)."""

from __future__ import annotations

import types
from typing import Any

import numba as nb

#: Trees a thread walks at least for a kernel to go parallel.
MIN_TREES_PER_THREAD = 8
#: Parts of a kernel's trees per thread: a tree's work varies (a selection takes from one simulation
#: to many), and smaller parts even the threads out.
CHUNKS_PER_THREAD = 4


def usable_threads(threads: int) -> int:
    """The threads a kernel runs on for a run given `threads` (0: every one numba has): at most
    numba's pool (NUMBA_NUM_THREADS, this machine's CPUs unless set)."""
    most = int(nb.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # set at import
    return most if threads <= 0 else min(threads, most)


def chunks_for(trees: int, threads: int) -> int:
    """The parts a kernel over `trees` trees splits into on `threads` threads (1: serial), the
    calling thread's numba threads set to match."""
    if threads > 1 and trees >= MIN_TREES_PER_THREAD * threads:
        nb.set_num_threads(threads)
        return CHUNKS_PER_THREAD * threads
    return 1


def named(function: Any, name: str, **replaced: Any) -> Any:
    """`function` under another name, the functions it calls by the names in `replaced` replaced:
    numba keys its disk cache by a function's name, not by how it was compiled, so the parallel
    and the serial compilation of one function need two names."""
    copy = types.FunctionType(
        function.__code__,
        {**function.__globals__, **replaced},
        name,
        function.__defaults__,
        function.__closure__,
    )
    copy.__qualname__ = name
    return copy


def inlined(kernel: Any) -> Any:
    """A kernel that numba inlines where it is called (so that a call passes no arrays)."""
    return nb.njit(cache=True, nogil=True, inline="always")(
        named(kernel.py_func, f"{kernel.__name__}_inline")
    )


class Twins:
    """A kernel whose last argument is its number of parts (`chunks`), compiled over numba's
    threads and on the calling thread (with `serial_inline`'s kernels inlined there)."""

    def __init__(self, function: Any, name: str, **serial_inline: Any) -> None:
        self.parallel = nb.njit(cache=True, nogil=True, parallel=True)(named(function, f"{name}_parallel"))
        self.serial = nb.njit(cache=True, nogil=True)(
            named(function, f"{name}_serial", **{k: inlined(v) for k, v in serial_inline.items()})
        )

    def __call__(self, trees: int, threads: int, *args: Any) -> Any:
        """The kernel over `trees` trees on `threads` threads (serial with few trees a thread)."""
        chunks = chunks_for(trees, threads)
        return (self.parallel if chunks > 1 else self.serial)(*args, chunks)
