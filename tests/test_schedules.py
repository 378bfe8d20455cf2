"""Schedules of ε and the learning rate: values at chosen steps, and errors that name the fix."""

from __future__ import annotations

import pytest

from framework.schedules import build_schedule


def test_a_number_is_a_constant_schedule() -> None:
    schedule = build_schedule(0.25, name="agent.exploration")
    assert [schedule(s) for s in (0, 10, 10**9)] == [0.25, 0.25, 0.25]
    assert build_schedule({"kind": "constant", "value": 3}, name="x")(7) == 3.0


def test_linear_interpolates_then_stays_at_the_end_value() -> None:
    schedule = build_schedule({"kind": "linear", "start": 1.0, "end": 0.04, "steps": 8000}, name="x")
    assert schedule(0) == 1.0
    assert schedule(2000) == pytest.approx(1.0 - 0.96 / 4)
    assert schedule(4000) == pytest.approx(0.52)
    assert schedule(8000) == pytest.approx(0.04)
    assert schedule(50_000) == pytest.approx(0.04)


def test_linear_fraction_is_of_the_runs_total_steps() -> None:
    spec = {"kind": "linear", "start": 1.0, "end": 0.0, "fraction": 0.16}
    schedule = build_schedule(spec, name="x", total_steps=50_000)
    assert schedule(4000) == pytest.approx(0.5) and schedule(8000) == 0.0
    with pytest.raises(ValueError, match="'fraction' needs the run's total_steps"):
        build_schedule(spec, name="x")


def test_piecewise_interpolates_between_endpoints_and_uses_the_outside_value() -> None:
    spec = {"kind": "piecewise", "endpoints": [[100, 1.0], [200, 0.5], [400, 0.1]], "outside_value": 0.01}
    schedule = build_schedule(spec, name="x")
    assert schedule(100) == 1.0
    assert schedule(150) == pytest.approx(0.75)
    assert schedule(300) == pytest.approx(0.3)
    assert schedule(400) == pytest.approx(0.1)
    assert schedule(401) == 0.01 and schedule(99) == 0.01


def test_piecewise_without_outside_value_holds_the_nearest_endpoint() -> None:
    schedule = build_schedule({"kind": "piecewise", "endpoints": [[10, 2.0], [20, 4.0]]}, name="x")
    assert (schedule(0), schedule(15), schedule(1000)) == (2.0, pytest.approx(3.0), 4.0)


def test_null_keys_count_as_absent() -> None:
    schedule = build_schedule(
        {"kind": "linear", "start": 1.0, "end": 0.0, "steps": 10, "fraction": None}, name="x"
    )
    assert schedule(5) == 0.5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"kind": "cosine", "start": 1.0},
            r"agent.exploration.kind='cosine' is not a schedule kind; "
            r"choose one of constant, linear, piecewise",
        ),
        ({"start": 1.0, "end": 0.1, "steps": 5}, r"agent.exploration.kind=None is not a schedule kind"),
        ("fast", r"agent.exploration='fast' is not a schedule"),
        (True, r"agent.exploration=True is not a schedule"),
        ({"kind": "linear", "start": 1.0, "end": 0.1}, r"exactly one of 'steps' or 'fraction'"),
        (
            {"kind": "linear", "start": 1.0, "end": 0.1, "steps": 5, "fraction": 0.5},
            r"exactly one of 'steps' or 'fraction'",
        ),
        ({"kind": "linear", "start": 1.0, "end": 0.1, "steps": -1}, r"agent.exploration.steps=-1 must be"),
        (
            {"kind": "linear", "start": 1.0, "end": 0.1, "fraction": 1.5},
            r"fraction=1.5 must be between 0 and 1",
        ),
        (
            {"kind": "linear", "start": "high", "end": 0.1, "steps": 5},
            r"agent.exploration.start='high' must be",
        ),
        ({"kind": "constant", "value": 1, "steps": 5}, r"unknown key\(s\) steps for a constant schedule"),
        ({"kind": "constant"}, r"a constant schedule needs value"),
        ({"kind": "piecewise", "endpoints": []}, r"non-empty list of \[step, value\] pairs"),
        (
            {"kind": "piecewise", "endpoints": [[5, 1.0], [5, 0.5]]},
            r"steps \[5, 5\] must be strictly increasing",
        ),
        ({"kind": "piecewise", "endpoints": [[0, 1.0, 2.0]]}, r"is not a \[step, value\] pair"),
    ],
)
def test_bad_specs_fail_naming_the_key_and_the_valid_choices(spec: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_schedule(spec, name="agent.exploration", total_steps=100)
