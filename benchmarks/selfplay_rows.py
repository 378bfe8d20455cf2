"""The rows of benchmarks/mcts_batching.py: a configuration's self-play rates and ratios, the
measurements that fill them, and the Ray workers' rows beside the best in-process configuration."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

WORKERS_TARGET = 0.8
"""N workers' simulations/s over the best in-process configuration's."""


@dataclass
class Row:
    name: str
    rates: list[float] = field(default_factory=list)
    x_ceiling: list[float] = field(default_factory=list)
    x_best: list[float] = field(default_factory=list)
    """Each round's rate over that round's best in-process self-play rate."""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return median_of(self.rates)

    def ratios(self, ceiling: float, best: float) -> None:
        """This round's ratios, from its last rate."""
        self.x_ceiling.append(self.rates[-1] / ceiling)
        self.x_best.append(self.rates[-1] / best)


def median_of(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def median_ratio(values: list[float]) -> str:
    """A median ratio, or nothing where the row has none (a row measured apart from the rounds)."""
    median = median_of([v for v in values if v == v])
    return "" if median != median else f"{median:.2f}x"


def forward_rate(evaluator: Any, planes: np.ndarray, seconds: float) -> float:
    evaluator(planes)
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        evaluator(planes)
        n += len(planes)
    return n / (time.perf_counter() - started)


def runner_rate(runner: Any, engine: Any, steps: int) -> float:
    """Simulations/s over `steps` runner steps."""
    sims, started = engine.simulations, time.perf_counter()
    for _ in range(steps):
        runner.step()
    return (engine.simulations - sims) / (time.perf_counter() - started)


@dataclass
class Side:
    """A self-play side measured in each round: its row, runner, search, steps a measurement
    (times --steps) and the torch threads it runs with."""

    row: Row
    runner: Any
    search: Any
    steps: int
    threads: int = 1

    def measure(self, steps: int) -> float:
        import torch

        torch.set_num_threads(self.threads)
        try:
            return runner_rate(self.runner, self.search, steps * self.steps)
        finally:
            torch.set_num_threads(1)


def workers_rows(
    args: argparse.Namespace,
    best_side: Side,
    cell: tuple[str, int, float],
    async_config: Any,
    async_search: Any,
    make_workers: Any,
) -> list[Row]:
    """N workers beside the best in-process configuration, measured again just before they start
    (nothing else running); each wait bounded: a call not back within --grace says what it was."""
    k, b, w = cell
    baseline = Row(f"{best_side.row.name} (again, before the workers)")
    waited, others = wait_until_quiet(args.grace)
    print(
        f"  before the workers' baseline: {waited:.1f} s for the machine's other processes to quiet"
        f" down (they used {others:.2f} cores at the end)",
        flush=True,
    )
    for _ in range(args.repeats):
        baseline.rates.append(best_side.measure(args.steps))
        baseline.ratios(float("nan"), baseline.rates[-1])
    row = Row(f"ray_async, {args.workers} workers x {args.games} games (bs={b} wait={w:g}ms {k})")
    cfg = async_config(b, w, k)
    deadline = [time.perf_counter() + args.grace]
    waiting = ["the inference actors to start"]
    source = inference = None
    try:
        _, inference = async_search(cfg, 4)
        waiting[0] = f"{args.workers} workers to start (each compiles its kernels)"
        deadline[0] = time.perf_counter() + args.grace
        source = make_workers(cfg, inference, lambda: time.perf_counter() > deadline[0])
        for _ in range(args.workers * 2):
            waiting[0] = "the workers' first moves"
            deadline[0] = time.perf_counter() + args.grace
            source.step()
        for _ in range(args.repeats):
            window = args.seconds / args.repeats
            waiting[0] = f"a worker call (a move in {args.games} games) within {window + args.grace:.0f} s"
            sims, t0 = source.simulations, time.perf_counter()
            deadline[0] = t0 + window + args.grace
            while time.perf_counter() - t0 < window:
                source.step()
            row.rates.append((source.simulations - sims) / (time.perf_counter() - t0))
            row.ratios(float("nan"), median_of(baseline.rates))
    except KeyboardInterrupt:
        print(f"  the {args.workers} workers' measurement ran past its time, waiting for {waiting[0]}")
    finally:
        if source is not None:
            source.close()
        if inference is not None:
            inference.close()
    before, rounds = median_of(baseline.rates), best_side.row.median
    if row.rates:
        # The verdict against the higher of the configuration's two figures: the best it was seen to do.
        gain = row.median / max(before, rounds)
        met = "met" if gain >= WORKERS_TARGET else "NOT met"
        print(
            f"{args.workers} workers: {row.median:,.0f} sims/s = {row.median / before:.2f}x the best"
            f" in-process configuration measured just before them ({best_side.row.name}, {before:,.0f}"
            f" sims/s) and {row.median / rounds:.2f}x its median in the rounds above ({rounds:,.0f});"
            f" target >= {WORKERS_TARGET}x the higher: {met}"
        )
    return [baseline, row] if row.rates else [baseline]


def wait_until_quiet(limit_s: float, cores: float = 0.5, window_s: float = 0.5) -> tuple[float, float]:
    """Wait (at most `limit_s`) until the processes other than this one use under `cores` CPUs over
    `window_s` (Ray's freshly started idle workers import for seconds); (seconds waited, the cores
    they used in the last window). Linux's /proc; elsewhere nothing is waited for."""

    def busy() -> tuple[float, float] | None:
        try:
            fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
            mine = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        ticks = [int(f) for f in fields]
        total_busy = sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # less idle, iowait
        return float(total_busy), float(int(mine[11]) + int(mine[12]))  # utime + stime

    hertz = os.sysconf("SC_CLK_TCK")
    started = time.perf_counter()
    others = float("nan")
    while True:
        first = busy()
        if first is None:
            return 0.0, others
        time.sleep(window_s)
        second = busy()
        if second is None:
            return 0.0, others
        others = ((second[0] - first[0]) - (second[1] - first[1])) / hertz / window_s
        waited = time.perf_counter() - started
        if others < cores or waited >= limit_s:
            return waited, others
