"""A preset's self-play rate as a user runs it: `python -m framework experiment=PRESET` with each
configuration of `--configs`, side by side, each run stopped like Ctrl-C after `--seconds`.

Each run logs its progress every `--every` seconds (steps are self-play moves); the rate is the
moves between the first log line after `--warmup` seconds (compiling, the first searches) and the
last one, over the time between them, so training phases and gates fall in it as they do in a run.
Runs of the configurations alternate, `--repeats` times; the table shows each configuration's
median and its ratio to the first configuration's median, measured in the same invocation.

    python benchmarks/preset_selfplay.py [--preset gomoku_9x9] [--configs "threads=1;threads=2"]
        [--seconds 90] [--warmup 30] [--repeats 2] [--target 1.6] [-- more overrides for every run]

The 9x9 preset on this project's 2-core machine: `--configs "threads=1;threads=2" --target 1.6`.
A GPU machine: `--preset gomoku_15x15 --configs "device=cuda"`. Runs are not tracked (tracking=none;
`-- tracking=mlflow` after the options tracks them).
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

LINE = re.compile(r"^\[(?P<when>[\d-]+ [\d:,]+)\]\[framework\]\[INFO\] - step (?P<step>\d+)/")


def moves_per_s(log: Path, warmup_s: float) -> tuple[float, int]:
    """(moves/s between the first progress line after warmup_s and the last, moves in that span)."""
    points = []
    for line in log.read_text().splitlines():
        found = LINE.match(line)
        if found:
            when = datetime.strptime(found["when"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            points.append((when, int(found["step"])))
    if len(points) < 2:
        return float("nan"), 0
    start = points[0][0] + warmup_s
    after = [p for p in points if p[0] >= start]
    if len(after) < 2:
        return float("nan"), 0
    (t0, s0), (t1, s1) = after[0], after[-1]
    return (s1 - s0) / (t1 - t0), s1 - s0


def run(preset: str, config: str, more: list[str], args: argparse.Namespace, out: Path) -> tuple[float, int]:
    """One run of the preset with `config`'s overrides, stopped like Ctrl-C after --seconds."""
    command = [
        sys.executable,
        "-m",
        "framework",
        f"experiment={preset}",
        *shlex.split(config),
        "progress=log",
        f"log_every_s={args.every}",
        "eval.every_steps=0",
        "checkpoint.every_steps=1000000000",
        "tracking=none",
        f"hydra.run.dir={out}",
        *more,
    ]
    with open(out.parent / f"{out.name}.out", "w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        try:
            process.wait(timeout=args.seconds)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                print(f"  {config}: did not stop within 120 s of Ctrl-C; killed", flush=True)
    if process.returncode not in (0, 130, 1) and not (out / "framework.log").exists():
        raise SystemExit(
            f"{' '.join(command)} failed ({process.returncode}): see {out.parent / out.name}.out"
        )
    return moves_per_s(out / "framework.log", args.warmup)


#: What a run's output says of its pace that the table does not (agent.background_training's line).
NOTES = re.compile(r"training in the background: .*|\w*Error: .*|training updates as a CUDA graph failed.*")


def notes(output: Path) -> list[str]:
    """The lines of a run's output worth printing beside its rate: how its background training
    went, and the last error it met, if any."""
    if not output.exists():
        return []
    found = [m.group(0) for m in map(NOTES.search, output.read_text(errors="replace").splitlines()) if m]
    return found[-3:]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="gomoku_9x9")
    parser.add_argument(
        "--configs",
        default="threads=1;threads=2",
        help="configurations side by side, ';'-separated overrides",
    )
    parser.add_argument("--seconds", type=float, default=90.0, help="each run's length")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of each run left out")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between progress lines")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--target", type=float, default=None, help="the last configuration's ratio to reach")
    parser.add_argument("--keep", help="keep the runs' folders here (default: a temporary folder)")
    parser.add_argument("more", nargs="*", help="overrides for every run (after --)")
    args = parser.parse_args()
    configs = [c.strip() for c in args.configs.split(";") if c.strip()]
    if args.seconds <= args.warmup + 2 * args.every:
        raise SystemExit("--seconds must leave a few progress lines after --warmup")
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="preset-selfplay-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"experiment={args.preset}, {len(configs)} configurations x {args.repeats} runs of {args.seconds:g} s"
        f" (rates after {args.warmup:g} s), alternating; runs in {folder}",
        flush=True,
    )
    rates: dict[str, list[float]] = {c: [] for c in configs}
    started = time.perf_counter()
    for r in range(args.repeats):
        for _i, config in enumerate(configs if r % 2 == 0 else configs[::-1]):
            rate, moves = run(
                args.preset, config, args.more, args, folder / f"run{r}_{configs.index(config)}"
            )
            rates[config].append(rate)
            print(f"  {config or '(preset)'}: {rate:,.1f} moves/s ({moves} moves measured)", flush=True)
            for line in notes(folder / f"run{r}_{configs.index(config)}.out"):
                print(f"    {line}", flush=True)
    base = statistics.median(rates[configs[0]])
    print(
        f"\nself-play moves/s, median of {args.repeats} runs ({time.perf_counter() - started:.0f} s in all)\n"
    )
    width = max(len(c) for c in configs) + 2
    print(f"| {'configuration':<{width}} | moves/s | x {configs[0] or 'preset'} |")
    print(f"|{'-' * (width + 2)}|---------|{'-' * (len(configs[0] or 'preset') + 4)}|")
    for config in configs:
        median = statistics.median(rates[config])
        print(f"| {config or '(preset)':<{width}} | {median:7,.1f} | {median / base:.2f}x |")
    print(f"  (baseline: {configs[0] or 'the preset'}, {base:,.1f} moves/s, measured in this run)")
    if args.target is not None:
        ratio = statistics.median(rates[configs[-1]]) / base
        met = "met" if ratio >= args.target else "MISSED"
        print(f"  [{met}] {configs[-1]} >= {args.target}x {configs[0]}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
