"""Statistics over seeds, as RL papers now report them (Agarwal et al., "Deep RL at the Edge of the
Statistical Precipice", NeurIPS 2021, and its `rliable` library, whose definitions these follow).

Scores are arrays of shape (runs, tasks): one row per seed, one column per task (a sweep's
configurations are compared on one task, their objective). Every interval is a 95 % percentile
interval of a stratified bootstrap: each task's runs are resampled with replacement, independently
per task, `reps` times. Numpy only: rliable's own needs `arch`, whose releases rliable accepts
(< 8) do not import beside pandas 3; tests check these against rliable's results on fixed data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Bootstrap replications for a configuration's interval (rliable's default for point aggregates).
REPS = 50_000
#: Replications for the intervals of a curve or a profile: one per point, so fewer (rliable's default).
CURVE_REPS = 2_000
CONFIDENCE = 0.95

Statistic = Callable[[np.ndarray], np.ndarray]
"""A statistic of resampled scores: (reps, runs, tasks) -> (reps,) or (reps, k)."""


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its bootstrap interval."""

    value: float
    low: float
    high: float

    def overlaps(self, other: Estimate) -> bool:
        return self.low <= other.high and other.low <= self.high


def as_scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """(runs, tasks) float scores; a flat sequence is one task's runs."""
    found = np.asarray(scores, dtype=float)
    if found.ndim == 1:
        found = found[:, None]
    if found.ndim != 2 or found.shape[0] == 0:
        raise ValueError(f"scores must be (runs, tasks) with at least one run, got shape {found.shape}")
    return found


def iqm(scores: np.ndarray) -> np.ndarray:
    """The interquartile mean of every run and task together (the mean of the middle half, cutting
    floor(n/4) values at each end: scipy's trim_mean(…, 0.25), rliable's aggregate_iqm), over the
    last two axes: (runs, tasks) -> (), (reps, runs, tasks) -> (reps,)."""
    flat = np.sort(scores.reshape(*scores.shape[:-2], -1), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut : flat.shape[-1] - cut].mean(axis=-1)


def mean(scores: np.ndarray) -> np.ndarray:
    """The mean over runs of each task, averaged over tasks (rliable's aggregate_mean)."""
    return scores.mean(axis=-2).mean(axis=-1)


def median(scores: np.ndarray) -> np.ndarray:
    """The median over tasks of each task's mean over runs (rliable's aggregate_median: with one task,
    the mean; `runs_median` is the median of the runs)."""
    return np.median(scores.mean(axis=-2), axis=-1)


def runs_median(scores: np.ndarray) -> np.ndarray:
    """The median of every run and task together, over the last two axes (a configuration's median
    over its seeds)."""
    return np.median(scores.reshape(*scores.shape[:-2], -1), axis=-1)


def resample(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, runs, tasks): each task's runs drawn with replacement, independently per task."""
    runs, tasks = scores.shape
    rows = rng.integers(0, runs, size=(reps, runs, tasks))
    return scores[rows, np.arange(tasks)]


def interval(
    scores: np.ndarray,
    statistic: Statistic,
    *,
    reps: int = REPS,
    rng: np.random.Generator | None = None,
    confidence: float = CONFIDENCE,
) -> tuple[np.ndarray, np.ndarray]:
    """The statistic's percentile interval over stratified bootstrap resamples: (low, high), each
    the statistic's shape."""
    rng = rng if rng is not None else np.random.default_rng(0)
    values = statistic(resample(scores, reps, rng))
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(values, [tail, 100 - tail], axis=0)
    return low, high


def estimate(
    scores: Sequence[float] | np.ndarray,
    statistic: Statistic = iqm,
    *,
    reps: int = REPS,
    rng: np.random.Generator | None = None,
) -> Estimate:
    """A scalar statistic (the IQM by default) of the scores, with its bootstrap interval."""
    found = as_scores(scores)
    low, high = interval(found, statistic, reps=reps, rng=rng)
    return Estimate(float(statistic(found)), float(low), float(high))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) per task, averaged over tasks: the Mann-Whitney U statistic of x over y (ties count a
    half) over the number of pairs (rliable's probability_of_improvement). Over the last two axes:
    (runs, tasks) pairs -> (), (reps, runs, tasks) pairs -> (reps,)."""
    wins = (x[..., :, None, :] > y[..., None, :, :]).sum(axis=(-3, -2))
    ties = (x[..., :, None, :] == y[..., None, :, :]).sum(axis=(-3, -2))
    pairs = x.shape[-2] * y.shape[-2]
    return ((wins + 0.5 * ties) / pairs).mean(axis=-1)


def improvement(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    mode: str = "max",
    reps: int = REPS,
    rng: np.random.Generator | None = None,
) -> Estimate:
    """The probability that a run of X beats a run of Y (lower is better with mode="min"), with the
    interval of a bootstrap that resamples X's and Y's runs independently (rliable's
    StratifiedIndependentBootstrap). The same scores in any order give the same interval."""
    sign = 1.0 if mode == "max" else -1.0
    xs, ys = np.sort(sign * as_scores(x), axis=0), np.sort(sign * as_scores(y), axis=0)
    rng = rng if rng is not None else np.random.default_rng(0)
    values = probability_of_improvement(resample(xs, reps, rng), resample(ys, reps, rng))
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return Estimate(float(probability_of_improvement(xs, ys)), float(low), float(high))


def score_distribution(scores: np.ndarray, taus: np.ndarray, mode: str = "max") -> np.ndarray:
    """The fraction of runs (of every task) scoring above each threshold, below it with mode="min"
    (rliable's score_distributions): (runs, tasks) -> (len(taus),), (reps, runs, tasks) -> (reps,
    len(taus))."""
    flat = scores.reshape(*scores.shape[:-2], -1)[..., None]
    better = flat > taus if mode == "max" else flat < taus
    return better.mean(axis=-2)


@dataclass(frozen=True)
class Profile:
    """A performance profile: the fraction of runs better than each threshold, and its band."""

    taus: np.ndarray
    fraction: np.ndarray
    low: np.ndarray
    high: np.ndarray


def profile(
    scores: Sequence[float] | np.ndarray,
    taus: np.ndarray,
    *,
    mode: str = "max",
    reps: int = CURVE_REPS,
    rng: np.random.Generator | None = None,
) -> Profile:
    found = as_scores(scores)
    low, high = interval(found, lambda s: score_distribution(s, taus, mode), reps=reps, rng=rng)
    return Profile(taus, score_distribution(found, taus, mode), low, high)


@dataclass(frozen=True)
class Curve:
    """A learning curve over seeds: at each step, the IQM of the runs that measured there, and its
    bootstrap interval; `runs` says how many runs each point holds."""

    steps: np.ndarray
    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    runs: np.ndarray


def curve(
    histories: Sequence[tuple[Sequence[int], Sequence[float]]],
    *,
    points: int = 60,
    reps: int = CURVE_REPS,
    rng: np.random.Generator | None = None,
) -> Curve:
    """The IQM curve of runs that evaluated at steps of their own (an SB3 rollout ends past the
    step an evaluation was due): each run's curve is read at up to `points` steps spread over the
    steps they logged, as its last value at or before that step, and only within its own span
    (a run that stopped early does not hold the others' ends)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    runs = [
        (np.asarray(s, dtype=float)[order], np.asarray(v, dtype=float)[order])
        for s, v in histories
        if len(s)
        for order in [np.argsort(np.asarray(s, dtype=float), kind="stable")]
    ]
    if not runs:
        empty = np.zeros(0)
        return Curve(empty, empty, empty, empty, empty.astype(int))
    every = np.unique(np.concatenate([s for s, _ in runs]))
    grid = (
        every if len(every) <= points else every[np.linspace(0, len(every) - 1, points).round().astype(int)]
    )
    grid = np.unique(grid)
    value, low, high, counts = (np.full(len(grid), np.nan) for _ in range(4))
    for i, step in enumerate(grid):
        here = [v[np.searchsorted(s, step, side="right") - 1] for s, v in runs if s[0] <= step <= s[-1]]
        counts[i] = len(here)
        if here:
            scores = as_scores(here)
            value[i] = float(iqm(scores))
            low[i], high[i] = (float(b) for b in interval(scores, iqm, reps=reps, rng=rng))
    return Curve(grid, value, low, high, counts.astype(int))
