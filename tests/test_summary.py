"""The last lines of a run say what became of its objective metric."""

from __future__ import annotations

from pathlib import Path

from framework.summary import RunSummary


def summary(objective: str = "eval/return_mean") -> RunSummary:
    return RunSummary("run", "abc", Path("outputs/x"), 1000, objective, "mlflow ui")


def test_the_objective_is_shown_with_its_spread() -> None:
    text = summary().text("FINISHED", 1000, {"eval/return_mean": 12.5, "eval/return_std": 0.5}, 1000)
    assert text.splitlines()[0] == "Run FINISHED at step 1000 of 1000."
    assert "eval/return_mean  12.5 ± 0.5" in text


def test_an_objective_no_evaluation_measured_says_why() -> None:
    assert "not measured (no evaluation ran)" in summary().text("KILLED", 10, {})
    text = summary("eval/mcts1000/score").text("FINISHED", 1000, {"eval/random/score": 1.0}, 1000)
    assert "eval/mcts1000/score  not measured (not among this run's evaluation metrics)" in text


def test_a_run_past_its_budget_and_an_error_are_explained() -> None:
    text = summary().text("FAILED", 1024, {"eval/return_mean": 1.0}, 900, error=ValueError("bad\nmore"))
    assert "past the budget" in text.splitlines()[0]
    assert "(evaluated at step 900)" in text
    assert "error             ValueError: bad" in text and "more" not in text
