"""Fighter transports side by side: steps/s and step latency, beside a raw data-channel echo.

One run, one table: the in-process twin, the twin behind an aiortc peer (`python`) and the
JavaScript page in headless Chromium (`browser`), each with 1 and 16 arenas on one connection,
and the ceiling: the same WebRTC client and message sizes, answered by a peer that does no
game work (a canned reply), measured in the same run.

    python benchmarks/fighter_transport.py [--seconds 3] [--rounds 9] [--unpinned]

A headless Chromium runs on one CPU of its own (env.pin_chromium); `--unpinned` adds the page in a
Chromium free to use every CPU, for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from framework_plugins.fighter import rules
from framework_plugins.fighter.protocol import pack_game
from framework_plugins.fighter.python_peer import TOKEN_VARIABLE, play
from framework_plugins.fighter.transports import InProcessTransport, Transport, WebRTCTransport
from framework_plugins.fighter.vector import FighterVectorEnv

#: Seconds each cell steps before it measures, and pauses after its client has closed.
WARM_UP_S = 1.0
SETTLE_S = 1.0


class EchoTransport(WebRTCTransport):
    """The WebRTC client with an echo peer: every request answered at once with a canned result."""

    def __init__(self) -> None:
        super().__init__("python-echo", connect_timeout_s=30)

    def _start_client(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--echo-peer", self.connection.offer_url],
            stdin=subprocess.PIPE,
            env={**os.environ, TOKEN_VARIABLE: self.connection.token},
            start_new_session=True,
        )


def echo_peer(offer_url: str) -> None:
    token = os.environ[TOKEN_VARIABLE]
    C = rules.load_constants()
    canned: dict[int, list[list[int]]] = {}

    def respond(raw: str | bytes) -> dict[str, Any] | None:
        m = json.loads(raw)
        if m["type"] == "ping":
            return {"type": "pong", "id": m["id"]}
        if m["type"] not in ("reset", "step"):  # status messages are not answered
            return None
        n = len(m.get("actions") or m.get("seeds"))
        games = canned.setdefault(n, [pack_game(rules.new_game(C, i, "idle")) for i in range(n)])
        return {"type": "result", "episode": m["episode"], "step": m.get("step", 0), "games": games}

    asyncio.run(play([offer_url], token, respond))


def measure(transport: Transport, n: int, seconds: float) -> tuple[float, float, float]:
    """(steps/s counted over all arenas, p50 and p99 latency of one vector step in ms)."""
    env = FighterVectorEnv(n, transport=transport, opponent="random")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    warm_up = time.perf_counter() + WARM_UP_S  # a fresh client's own start-up work settles first
    while time.perf_counter() < warm_up:
        env.step(rng.integers(0, 9, n))
    latencies: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        actions = rng.integers(0, 9, n)
        t0 = time.perf_counter()
        env.step(actions)
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    env.close()
    time.sleep(SETTLE_S)  # the client's processes end before the next cell starts
    ms = sorted(x * 1000 for x in latencies)
    return len(latencies) * n / elapsed, statistics.median(ms), ms[int(0.99 * (len(ms) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per cell and round")
    parser.add_argument("--rounds", type=int, default=9, help="rounds over all cells; medians are reported")
    parser.add_argument(
        "--unpinned", action="store_true", help="also the page in a Chromium free to use every CPU"
    )
    parser.add_argument("--echo-peer", metavar="OFFER_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_peer:
        echo_peer(args.echo_peer)
        return
    sides: list[tuple[str, Callable[[], Transport]]] = [
        ("echo ceiling (aiortc)", EchoTransport),
        ("inprocess", InProcessTransport),
        ("python (aiortc peer)", lambda: WebRTCTransport("python", connect_timeout_s=30)),
        ("browser (headless)", lambda: WebRTCTransport("browser", connect_timeout_s=60)),
    ]
    if args.unpinned:
        unpinned = {"connect_timeout_s": 60, "pin_chromium": False}
        sides.append(("browser (every CPU)", lambda: WebRTCTransport("browser", **unpinned)))
    runs: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    for round_ in range(args.rounds):  # rounds interleave the sides, so drift hits all alike:
        # one arena on every side, then 16, every other round in the reverse order
        order = sides if round_ % 2 == 0 else sides[::-1]
        for n in (1, 16):
            for name, make in order:
                sps, p50, p99 = measure(make(), n, args.seconds)
                runs.setdefault((name, n), []).append((sps, p50, p99))
                print(
                    f"round {round_ + 1} {name:<24} n={n:<3} {sps:>9.0f} steps/s  p50 {p50:6.2f} ms",
                    flush=True,
                )
    results = {
        key: tuple(statistics.median(v[k] for v in values) for k in range(3)) for key, values in runs.items()
    }

    echo = "echo ceiling (aiortc)"

    def ratio(name: str, n: int, base: tuple[str, int]) -> float:
        """The median over rounds of each round's own ratio: a slow spell of the machine falls on
        both sides of a round alike."""
        return statistics.median(a[0] / b[0] for a, b in zip(runs[name, n], runs[base], strict=True))

    header = (
        f"{'transport':<24}{'arenas':>7}{'steps/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'vs echo':>9}{'16 vs 1':>9}"
    )
    print("\n" + header)
    for name, _ in sides:
        for n in (1, 16):
            sps, p50, p99 = results[name, n]
            scale = f"{ratio(name, 16, (name, 1)):.1f}x" if n == 16 else ""
            vs_echo = ratio(name, n, (echo, n))
            print(f"{name:<24}{n:>7}{sps:>10.0f}{p50:>9.2f}{p99:>9.2f}{vs_echo:>9.2f}{scale:>9}")
    print("(steps/s and latencies: medians over rounds; ratios: medians of each round's ratio)")
    print("\ngoals: single-env python and browser at >= 0.85 of the echo; 16 arenas at >= 8x one arena")


if __name__ == "__main__":
    main()
