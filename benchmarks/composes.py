"""A run's start: its config composed once (framework/composes.py) against Hydra's own three composes
(one to read `hydra.mode`, one to run, one for the preset a run's name is told from), and a sweep's
jobs composed once each against three times. The same command lines, alternating, in fresh processes;
medians of whole-process CPU and wall time, and their paired ratios.

    python benchmarks/composes.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: `python -m framework ARGS` with framework/composes.py left out where HYDRA_OWN is set.
RUNNER = """
import os, sys
if os.environ.get("HYDRA_OWN"):
    from framework import composes
    composes.install = lambda: None
    composes.without_values = lambda keys: None
sys.argv[0] = "framework"
from framework.__main__ import main
main()
"""
COMMANDS = {
    "a run, 200 steps": ["agent.learning_rate=0.001", "total_steps=200", "eval.episodes=1", "tracking=none"],
    "a sweep of 4 runs": ["-m", "seed=1,2,3,4", "total_steps=64", "eval.episodes=1", "tracking=none"],
}


def timed(args: list[str], cwd: Path, own: bool) -> tuple[float, float]:
    """(CPU s, wall s) of one command line, its children's CPU included."""
    env = {**os.environ, "HYDRA_OWN": "1"} if own else dict(os.environ)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUNNER, *args], cwd=cwd, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        print(f"{'command line':<20}{'side':<22}{'CPU s':>8}{'wall s':>8}{'CPU ratio':>11}{'wall ratio':>12}")
        for name, command in COMMANDS.items():
            timed(command, cwd, False)  # warm-up: file caches
            ours, hydras = [], []
            for _ in range(args.repeats):
                ours.append(timed(command, cwd, False))
                hydras.append(timed(command, cwd, True))
            for side, rows in (("Hydra's own composes", hydras), ("composed once", ours)):
                cpu, wall = (statistics.median(r[i] for r in rows) for i in (0, 1))
                ratios = [
                    statistics.median(r[i] / h[i] for r, h in zip(rows, hydras, strict=True)) for i in (0, 1)
                ]
                print(f"{name:<20}{side:<22}{cpu:>8.2f}{wall:>8.2f}{ratios[0]:>11.3f}{ratios[1]:>12.3f}")
    print(f"\nmedians of {args.repeats} alternating pairs; ratios: paired, against Hydra's own composes")


if __name__ == "__main__":
    main()
