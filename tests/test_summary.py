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
    # Equal returns: a spread of 0, not float rounding's (2.56e-16 was shown).
    text = summary().text("FINISHED", 1000, {"eval/return_mean": -2.0, "eval/return_std": 2.56e-16}, 1000)
    assert "eval/return_mean  -2 ± 0\n" in text + "\n", text


def test_an_objective_no_evaluation_measured_says_why() -> None:
    assert "not measured (no evaluation ran)" in summary().text("KILLED", 10, {})
    text = summary("eval/mcts1000/score").text("FINISHED", 1000, {"eval/random/score": 1.0}, 1000)
    assert "eval/mcts1000/score  not measured (not among this run's evaluation metrics)" in text


def test_a_run_past_its_budget_and_an_error_are_explained() -> None:
    text = summary().text("FAILED", 1024, {"eval/return_mean": 1.0}, 900, error=ValueError("bad\nmore"))
    assert "past the budget" in text.splitlines()[0]
    assert "(evaluated at step 900)" in text
    assert "error             ValueError: bad" in text and "more" not in text


def test_every_line_fits_100_columns_but_a_path_or_an_address() -> None:
    """Prose wraps within the value's column; a path, an address, and a command that holds one stay
    whole on their lines, to be copied."""
    run_dir = Path("/home/me/" + "deep/" * 30 + "outputs/2026-11-23/03-19-30")
    address = "http://127.0.0.1:5000/#/experiments/1/runs/472ee05b357741afb4c50b62e5814a76"
    view = f"python -m framework ui --run 472ee05b357741afb4c50b62e5814a76\n{address}"
    again = f"python -m framework resume={run_dir} tracking=none"
    long_error = OSError(28, "No space left on device while the checkpoint was written, " * 4 + str(run_dir))
    untracked = "not tracked (tracking=none): the run directory holds the checkpoints and the config"
    run = RunSummary(
        "cartpole-ppo-s0", "472ee05b357741afb4c50b62e5814a76", run_dir, 5000, "eval/return_mean", view
    )
    texts = [
        run.text("FINISHED", 5120, {"eval/return_mean": 389.6, "eval/return_std": 122.0}, 4096),
        run.text("FAILED", 10**9, {}, error=long_error),
        run.text("KILLED", 2048, {}, extra=[("checkpoint", str(run_dir)), ("continue with", again)]),
        RunSummary("r", "", run_dir, 100, "eval/return_mean", untracked).text("FINISHED", 100, {}),
    ]
    for text in texts:
        lines = text.splitlines()
        prose = [line for line in lines if "/" not in line.replace("eval/return_", "")]
        assert all(len(line) <= 100 for line in prose), "\n".join(x for x in prose if len(x) > 100)
        for line in set(lines) - set(prose):  # long only by the path or address it holds
            words = [w for w in line.split() if "/" in w and not w.startswith("eval/")]
            assert len(line) - sum(map(len, words)) <= 100, line
    first = texts[0].splitlines()[0]
    assert (
        first == "Run FINISHED at step 5120 of 5000 (its last rollout or update cycle ran past the budget)."
    )
    assert f"  run dir           {run_dir.resolve()}" in texts[0].splitlines()
    assert f"                    {address}" in texts[0].splitlines()
    assert f"  continue with     {again}" in texts[2].splitlines()  # a command stays one line
    said = " ".join(texts[1].split())  # the error, wrapped at spaces: nothing of it lost
    assert " ".join(f"error OSError: {long_error}".split())[:300] in said
    untracked_lines = texts[3].splitlines()[-2:]
    assert " ".join(" ".join(untracked_lines).split()) == f"view it {untracked}"
