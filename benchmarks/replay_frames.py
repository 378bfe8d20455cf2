"""The fighter's replay frames (drawing.draw): the stage and pixel grid drawn once a size, against both
drawn for every frame (the caches emptied before each, as drawing did before). The frames of a few
rounds of the game's own rules, alternating; the frames must be the same; medians and their ratio.

    python benchmarks/replay_frames.py [--rounds 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
from typing import Any

from framework_plugins.fighter import drawing, rules


def games(rounds: int) -> list[dict[str, Any]]:
    """Every frame's game of `rounds` rounds, random actions against the aggressive opponent."""
    C, found = rules.load_constants(), []
    for seed in range(rounds):
        rng, g = random.Random(seed), rules.new_game(C, seed, "aggressive")
        while not g["done"]:
            rules.step_frame(C, g, (rng.randrange(9), rules.opponent_action(C, g)))
            found.append({**g, "fighters": [dict(f) for f in g["fighters"]]})
    return found


def timed(frames: list[dict[str, Any]], cached: bool) -> tuple[float, str]:
    """(seconds a frame, the frames' digest)."""
    C, digest, spent = rules.load_constants(), hashlib.sha256(), 0.0
    for g in frames:
        if not cached:
            drawing._grid.cache_clear()
            drawing._background.cache_clear()
        started = time.perf_counter()
        img = drawing.draw(C, g)
        spent += time.perf_counter() - started
        digest.update(img.tobytes())
    return spent / len(frames), digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    frames = games(args.rounds)
    found: dict[bool, list[float]] = {True: [], False: []}
    digests = set()
    for _ in range(args.repeats):
        for cached in found:
            seconds, digest = timed(frames, cached)
            found[cached].append(seconds)
            digests.add(digest)
    assert len(digests) == 1, "the frames differ"
    ours, reference = (statistics.median(found[c]) * 1e3 for c in (True, False))
    print(f"{len(frames)} frames of {args.rounds} rounds, 400x200, medians of {args.repeats}:")
    print(f"  stage drawn once a size   {ours:.2f} ms a frame")
    print(f"  stage drawn every frame   {reference:.2f} ms a frame")
    print(f"  once / every frame: {ours / reference:.3f}x (the same frames)")


if __name__ == "__main__":
    main()
