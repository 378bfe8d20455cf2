"""What the MCTS benchmarks share: their tables, the machine they ran on, and thread counts."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable

import numpy as np

CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def thread_counts(spec: str | None) -> list[int]:
    """--threads as a list (default: 1, 2, 4, ... and this machine's CPU count)."""
    if spec:
        counts = sorted({int(t) for t in spec.split(",")})
        if counts[0] < 1:
            raise SystemExit(f"--threads {spec}: thread counts must be >= 1")
        return counts
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    counts = [1]
    while counts[-1] * 2 < cpus:
        counts.append(counts[-1] * 2)
    return sorted({*counts, cpus})


def print_table(header: list[str], lines: list[list[str]]) -> None:
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        cells = [line[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True))]
        print("| " + " | ".join(cells) + " |")


def print_machine() -> None:
    import numba

    print(
        f"machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python"
        f" {platform.python_version()}, numba {numba.__version__}, numpy {np.__version__}, {sys.platform}"
    )
