"""Evaluation episodes on a separate, separately seeded environment, and their metrics.
Training seeds are a run's `seed` (< 2**32) plus a count (< 2**63) or a drawn number (< 2**31), all below
2**64; every evaluation seed is 2**64 or more, so no evaluation replays any run's training reset."""

from __future__ import annotations

import contextlib
import math
import os
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

Policy = Callable[[Any], Any]

#: The normal quantile of the confidence intervals evaluation reports (95 %).
Z_95 = 1.959964

#: The least evaluation seed: above every training seed (a run's seed plus a count, below 2**64).
EVALUATION_SEEDS_FROM = 2**64
#: Run seeds are below this (`FrameworkConfig.seed`): each evaluation index has a block of its own.
RUN_SEEDS = 2**32

#: The prefix of evaluation metrics, and of the untrained agent's (beside the curve, not its first point).
EVAL_PREFIX, UNTRAINED_PREFIX = "eval/", "eval_untrained/"


def evaluation_seed(seed: int, index: int = 0) -> int:
    """`2**64 + index * 2**32 + seed`: the seed of a run's evaluation `index`, above every training seed.
    Index 0 seeds all the run's evaluations, so a learning curve compares the agent, not its luck; other
    games off the training data take 1, 2, ... Env plugins must take such seeds in `make`, `make_variant`
    and `reset` (gymnasium does); one needing 32 bits can seed a generator with it."""
    if not 0 <= seed < RUN_SEEDS:
        raise ValueError(f"seed={seed} must be from 0 to {RUN_SEEDS - 1} (a run's seed)")
    if index < 0:
        raise ValueError(f"index={index} must be 0 or more (0: the run's evaluations)")
    return EVALUATION_SEEDS_FROM + index * RUN_SEEDS + seed


@contextlib.contextmanager
def own_randomness(seed: int) -> Iterator[None]:
    """Python's, numpy's and (where imported) torch's global generators seeded with `seed` inside, and
    after it as they were: an evaluation (a stochastic policy's sampling, an env's) draws no number
    training would have, so how often a run evaluates does not change what it trains."""
    kept = random.getstate(), np.random.get_state()
    torch = sys.modules.get("torch")
    cuda = torch is not None and torch.cuda.is_initialized()
    with (
        torch.random.fork_rng(devices=range(torch.cuda.device_count()) if cuda else [])
        if torch
        else (contextlib.nullcontext())
    ):
        random.seed(seed)
        np.random.seed(seed % 2**32)
        if torch is not None:
            torch.manual_seed(seed)
        try:
            yield
        finally:
            random.setstate(kept[0])
            np.random.set_state(kept[1])


def untrained_metric(name: str) -> str:
    """A metric's name for an untrained agent: `eval/x` is `eval_untrained/x`; any other gets the prefix."""
    return UNTRAINED_PREFIX + name.removeprefix(EVAL_PREFIX)


def untrained_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """An evaluation's metrics under their untrained names (`untrained_metric`), in their order."""
    return {untrained_metric(name): value for name, value in metrics.items()}


@dataclass
class Episodes:
    """Evaluation episodes' returns, lengths and the env's `episode_stats`, each a list in episode order."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    stats: dict[str, list[float]] = field(default_factory=dict)

    def extend(self, other: Episodes) -> None:
        """Pool `other`'s episodes with these (all evaluation variants together, say)."""
        self.returns += other.returns
        self.lengths += other.lengths
        for key, values in other.stats.items():
            self.stats.setdefault(key, []).extend(values)


def play_episodes(
    act: Policy, env: Any, *, episodes: int, seed: int, max_steps: int = 1_000_000, stop: Any = None
) -> Episodes:
    """Play `episodes` episodes of `act`, seeding only the first reset: the set repeats, episodes differ.
    Fewer once `stop` (an Event: the run is stopping) is set."""
    found = Episodes()
    for episode in range(episodes):
        if stop is not None and stop.is_set():
            break
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        total, length, done = 0.0, 0, False
        info: dict[str, Any] = {}
        while not done and length < max_steps:
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += float(reward)
            length += 1
            done = bool(terminated or truncated)
        found.returns.append(total)
        found.lengths.append(length)
        for key, value in info.get("episode_stats", {}).items():
            found.stats.setdefault(key, []).append(float(value))
    return found


def summarize(found: Episodes, prefix: str = "eval") -> dict[str, float]:
    """`<prefix>/` + each `episode_stats` mean, `return_mean`, _std, _min, _max and `length_mean`; a
    `*_rate` stat of only 0s and 1s (wins) also gets its Wilson 95 % interval, `<stat>_ci_low`, `_ci_high`."""
    metrics: dict[str, float] = {}
    if not found.returns:  # none played: the run stopped first
        return metrics
    for key, values in found.stats.items():
        metrics[f"{prefix}/{key}"] = float(np.mean(values))
        if key.endswith("_rate") and all(v in (0.0, 1.0) for v in values):
            low, high = wilson_interval(int(sum(values)), len(values))
            metrics[f"{prefix}/{key}_ci_low"], metrics[f"{prefix}/{key}_ci_high"] = low, high
    returns = found.returns
    return {
        **metrics,
        f"{prefix}/return_mean": float(np.mean(returns)),
        f"{prefix}/return_std": float(np.std(returns)),
        f"{prefix}/return_min": float(np.min(returns)),
        f"{prefix}/return_max": float(np.max(returns)),
        f"{prefix}/length_mean": float(np.mean(found.lengths)),
    }


def run_episodes(
    act: Policy, env: Any, *, episodes: int, seed: int, max_steps: int = 1_000_000
) -> dict[str, float]:
    """The metrics (`summarize`) of `episodes` episodes of `act` on `env` (`play_episodes`)."""
    return summarize(play_episodes(act, env, episodes=episodes, seed=seed, max_steps=max_steps))


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion: inside [0, 1], not empty at 0 or n successes."""
    if n <= 0:
        raise ValueError(f"a confidence interval needs at least one trial, got n={n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must be within 0..n={n}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def record_video(env: Any, folder: Path, episodes: int) -> Any:
    """Wrap an `rgb_array` env so its first `episodes` episodes are written as mp4 to `folder`."""
    from gymnasium.wrappers import RecordVideo

    # SDL (pygame, for classic-control) draws off-screen: no display needed, no XDG_RUNTIME_DIR warning.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

    return RecordVideo(
        env, str(folder), episode_trigger=lambda e: e < episodes, name_prefix="eval", disable_logger=True
    )
