"""Seed statistics against rliable's, on the fixed data of benchmarks/against_rliable.py (whose
`--write` stored rliable 1.2.0's results in tests/data/rliable_reference.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from framework_plugins.trackers import seed_stats as ss

REFERENCE = json.loads((Path(__file__).parent / "data" / "rliable_reference.json").read_text())
DATA = {name: np.array(rows) for name, rows in REFERENCE["data"].items()}
RLIABLE = REFERENCE["rliable"]


def _tolerance(scores: np.ndarray) -> float:
    """Two bootstraps of 50,000 draws with different generators: their percentiles differ by a
    small fraction of the scores' range (a 90 % interval, or resampling all tasks' runs together,
    would miss by many times this)."""
    return 0.01 * float(scores.max() - scores.min())


@pytest.mark.parametrize("name", ["a", "b", "m"])
def test_point_estimates_are_rliables(name: str) -> None:
    scores = DATA[name]
    found = [float(ss.iqm(scores)), float(ss.mean(scores)), float(ss.median(scores))]
    assert found == pytest.approx(RLIABLE[name]["iqm_mean_median"], rel=1e-12)


@pytest.mark.parametrize("name", ["a", "b", "m"])
def test_stratified_bootstrap_intervals_are_rliables(name: str) -> None:
    scores = DATA[name]
    low, high = ss.interval(
        scores, lambda s: np.stack([ss.iqm(s), ss.mean(s), ss.median(s)], axis=-1), reps=REFERENCE["reps"]
    )
    theirs_low, theirs_high = RLIABLE[name]["interval"]
    assert low == pytest.approx(theirs_low, abs=_tolerance(scores))
    assert high == pytest.approx(theirs_high, abs=_tolerance(scores))
    iqm = ss.estimate(scores, reps=REFERENCE["reps"])
    assert iqm.low < iqm.value < iqm.high


def test_probability_of_improvement_is_rliables() -> None:
    a, b, m = DATA["a"], DATA["b"], DATA["m"]
    found = ss.improvement(a, b, reps=REFERENCE["reps"])
    assert found.value == pytest.approx(RLIABLE["poi_ab"]["value"], rel=1e-12)
    assert [found.low, found.high] == pytest.approx(RLIABLE["poi_ab"]["interval"], abs=0.01)
    assert float(ss.probability_of_improvement(m, m[::-1] * 0.9)) == pytest.approx(
        RLIABLE["poi_m"], rel=1e-12
    )
    # Lower is better: the probability is that of the other side, ties aside.
    assert ss.improvement(a, b, mode="min").value == pytest.approx(1 - found.value)
    assert ss.improvement(a, a).value == pytest.approx(0.5)


def test_probability_of_improvement_is_the_same_for_the_same_scores_in_any_order() -> None:
    """Its interval moved with the order the runs were listed in ([0.375, 1] against [0.4375, 1])."""
    a, b = [466.0, 500.0, 187.5, 500.0], [331.0, 500.0, 143.5, 258.0]
    first = ss.improvement(a, b)
    assert ss.improvement(a[::-1], b[1:] + b[:1]) == first


def test_performance_profile_is_rliables() -> None:
    taus = np.array(REFERENCE["taus"])
    found = ss.profile(DATA["a"], taus, reps=REFERENCE["reps"])
    assert found.fraction == pytest.approx(RLIABLE["profile_a"]["fraction"])
    low, high = RLIABLE["profile_a"]["interval"]
    assert found.low == pytest.approx(low, abs=0.01)
    assert found.high == pytest.approx(high, abs=0.01)
    below = ss.score_distribution(DATA["a"], taus, mode="min")
    assert np.all(np.diff(below) >= 0) and below[-1] == 1.0


def test_iqm_trims_a_quarter_at_each_end() -> None:
    assert float(ss.iqm(ss.as_scores([1, 2, 3, 4, 100, -50, 5, 6]))) == pytest.approx(3.5)
    one = ss.estimate([7.0])
    assert (one.value, one.low, one.high) == (7.0, 7.0, 7.0)
    with pytest.raises(ValueError, match="at least one run"):
        ss.as_scores([])


def test_curve_reads_each_run_within_its_own_span() -> None:
    """Runs that evaluated at steps of their own: each holds its last value at or before a step,
    and a run that stopped early is left out of the later points."""
    histories = [([10, 20, 30], [1.0, 2.0, 3.0]), ([12, 22, 32], [10.0, 20.0, 30.0]), ([10, 20], [5.0, 6.0])]
    found = ss.curve(histories, reps=500)
    at = dict(
        zip(found.steps.tolist(), zip(found.value.tolist(), found.runs.tolist(), strict=True), strict=True)
    )
    assert at[10] == (pytest.approx(3.0), 2)  # runs 1 and 3 (run 2 starts at 12)
    assert at[20][1] == 3 and at[20][0] == pytest.approx(float(ss.iqm(ss.as_scores([2.0, 10.0, 6.0]))))
    assert at[22][1] == 2  # run 3 ended at 20
    assert at[32] == (pytest.approx(30.0), 1)
    assert np.all(found.low <= found.value) and np.all(found.value <= found.high)
    thinned = ss.curve([(list(range(1000)), list(range(1000)))], points=50, reps=10)
    assert len(thinned.steps) == 50 and thinned.steps[0] == 0 and thinned.steps[-1] == 999
