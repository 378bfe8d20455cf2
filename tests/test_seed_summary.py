"""How a sweep's summary folds seeds into configurations (plugins/trackers/seed_summary.py), without a
store: labels by what sets a configuration apart (a schedule's keys with its name, a drawn value
short), and a configuration of one run neither best nor given an interval."""

from __future__ import annotations

import pytest


def test_a_schedules_setting_is_labelled_with_its_schedule() -> None:
    """`end=0.05` alone would not say whose end: a schedule's keys keep their schedule's name."""
    from plugins.trackers.seed_summary import short_labels

    keys = ["agent.exploration.end", "agent.lr", "agent.hyperparams.n_steps", "env.steps"]
    assert short_labels(keys) == {
        "agent.exploration.end": "exploration.end",
        "agent.lr": "lr",
        "agent.hyperparams.n_steps": "n_steps",
        "env.steps": "steps",
    }


def _children(scores: dict[str, list[float]]) -> list:
    from plugins.trackers.sweep_child import Child

    return [
        Child(f"{lr}{seed}", f"lr={lr} s{seed}", "FINISHED", 1.0, {"agent.lr": lr, "seed": str(seed)}, score)
        for lr, values in scores.items()
        for seed, score in enumerate(values)
    ]


def test_a_configuration_of_one_run_is_neither_best_nor_given_an_interval() -> None:
    """One run has no spread over seeds: it is never marked best, never stands apart by a zero-wide
    interval, and the verdict says it is left out; the median is the runs' own."""
    from plugins.trackers import seed_summary

    keys = ["agent.lr", "seed"]
    found = seed_summary.configurations(_children({"a": [10, 11, 40], "b": [90]}), keys, "max")
    assert [c.label for c in found] == ["lr=b", "lr=a"]
    assert seed_summary.separated_best(found) is None
    assert seed_summary.verdict(found, "R") == (
        "No configuration is best: 1 of the 2 ran over seeds, and one run gives no interval (seeds=N "
        "runs each configuration over N seeds)."
    )
    assert (found[1].mean, found[1].median) == (pytest.approx(61 / 3), 11)
    assert "(one run: no interval)" in seed_summary.section(found, "R", {}, "")
    found = seed_summary.configurations(
        _children({"a": [10, 11, 12], "c": [20, 21, 22], "b": [90]}), keys, "max"
    )
    best = seed_summary.separated_best(found)
    assert best is not None and best.label == "lr=c"
    assert seed_summary.verdict(found, "R") == (
        "Best: lr=c, its IQM's 95 % interval apart from every other's (3 seeds each; fewer than 5 "
        "give rough intervals); lr=b has a single "
        "run, so no interval, and is left out of the comparison."
    )
    # Each configuration's chance is against the leader run over seeds, never against a lone run.
    assert seed_summary.leader(found).label == "lr=c"
    chances = {c.label: c.improvement for c in found}
    assert chances["lr=a"] is not None and chances["lr=a"].value == 0  # against lr=c, not lr=b's 90
    assert chances["lr=c"] is not None and chances["lr=c"].value == 1  # against lr=a, the next over seeds
    assert chances["lr=b"] is None  # one run is one sample: no chance of 0 or 1 drawn from it
    assert [row["best"] for row in seed_summary.rows(found)] == ["", "yes", ""]
    assert seed_summary.verdict(found[:1], "R") == (
        "1 run: R 90; one run gives no interval (seeds=N runs a configuration over N seeds)."
    )


def test_the_pages_table_shows_a_drawn_value_short_and_keeps_it_whole_in_its_tooltip() -> None:
    from plugins.trackers.sweep_summary import _shorter

    assert _shorter("0.004148466620832118") == "0.004148"
    assert (_shorter("0.99"), _shorter("10"), _shorter("adam")) == ("0.99", "10", "adam")


def test_a_configurations_label_writes_a_drawn_value_short() -> None:
    """An Optuna trial's value in a label as a run's name writes it (the CSV and params keep it whole)."""
    from plugins.trackers import seed_summary

    children = _children({"0.005553612471748995": [1.0, 2.0], "0.0001": [3.0, 4.0]})
    found = seed_summary.configurations(children, ["agent.lr", "seed"], "max")
    assert sorted(c.label for c in found) == ["lr=1e-4", "lr=5.55e-3"]
    assert dict(found[-1].settings)["lr"] == "0.005553612471748995"
