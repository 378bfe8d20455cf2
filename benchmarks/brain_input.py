"""A Gomocup brain's input: a long BOARD block read in blocks (brain_io.input_lines) against a line at a
time from an unbuffered stream, a read per byte (how the brain read it before), both through the brain's
read-ahead thread. The same lines from a pipe, alternating; medians of CPU and wall time, their ratios.

    python benchmarks/brain_input.py [--lines 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import threading
import time
from collections.abc import Iterator

from framework_plugins.gomoku.brain_io import ReadAhead, input_lines
from framework_plugins.gomoku.gomocup import MAX_LINE


def byte_at_a_time(fd: int) -> Iterator[list[str]]:
    """The reference: FileIO.readline (a read per byte), each line a batch of its own."""
    stream = io.FileIO(fd, closefd=False)
    while line := stream.readline(MAX_LINE + 1):
        yield [line.decode("utf-8", errors="replace")]


def timed(reader: str, lines: int) -> tuple[float, float, int]:
    """(CPU s, wall s, lines answered) of reading `lines` BOARD lines written to a pipe."""
    ours, theirs = os.pipe()

    def write() -> None:
        block = b"7,7,1\n" * 10_000
        for _ in range(lines // 10_000):
            os.write(theirs, block)
        os.close(theirs)

    writer = threading.Thread(target=write, daemon=True)
    cpu, wall = time.process_time(), time.perf_counter()
    writer.start()
    batches = input_lines(ours, MAX_LINE) if reader == "blocks" else byte_at_a_time(ours)
    answered = sum(1 for _ in ReadAhead(batches))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    writer.join()
    os.close(ours)
    return cpu, wall, answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float]]] = {"blocks": [], "byte at a time": []}
    for _ in range(args.repeats):
        for reader in found:
            cpu, wall, answered = timed(reader, args.lines)
            assert answered == args.lines // 10_000 * 10_000, (reader, answered)
            found[reader].append((cpu, wall))
    print(f"{args.lines:,} BOARD lines through the brain's read-ahead, medians of {args.repeats}:")
    medians = {r: tuple(statistics.median(x[i] for x in runs) for i in (0, 1)) for r, runs in found.items()}
    for reader, (cpu, wall) in medians.items():
        print(f"  {reader:<15} {cpu:7.2f} CPU-s {wall:7.2f} s  ({cpu / args.lines * 1e6:.2f} CPU-us a line)")
    (ours_cpu, ours_wall), (ref_cpu, ref_wall) = medians["blocks"], medians["byte at a time"]
    print(f"  blocks / byte at a time: CPU {ours_cpu / ref_cpu:.3f}x, wall {ours_wall / ref_wall:.3f}x")


if __name__ == "__main__":
    main()
