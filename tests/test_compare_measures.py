"""What `compare` measures: runs evaluated otherwise are configurations apart, runs that never logged
the metric are said, and the page claims no more than the terminal does."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.test_compare import OBJECTIVE, _run, _store


def test_runs_evaluated_otherwise_are_configurations_apart_and_none_repeats_another(
    tmp_path: Path, cli
) -> None:
    uri, client, experiment = _store(tmp_path)
    greedy = {
        "agent.name": "dqn",
        "eval.episodes": "5",
        "eval.deterministic": "True",
        "eval.every_steps": "1000",
    }
    for seed, score in ((0, 221.0), (1, 200.0)):
        _run(client, experiment, {**greedy, "seed": str(seed)}, [score])
    _run(client, experiment, {**greedy, "eval.every_steps": "500", "seed": "2"}, [210.0])  # shown alike
    sampled = {**greedy, "eval.episodes": "20", "eval.deterministic": "False"}
    _run(client, experiment, {**sampled, "seed": "0"}, [179.0])
    ppo = _run(client, experiment, {"agent.name": "sb3", "seed": "0"}, [])  # never logged the metric
    r = cli("compare", f"tracking.uri={uri}", "--out", str(tmp_path / "cmp"))
    said = " ".join(r.stdout.split())
    assert r.returncode == 0 and "REPEATED" not in said and "run again later" not in said, r.output
    assert "Compared 5 runs (5 FINISHED) in 2 configurations" in said, r.stdout
    assert f"1 finished run is left out: it never logged {OBJECTIVE} (agent.name=sb3 seed=0)." in said
    rows = list(csv.DictReader((tmp_path / "cmp" / "compare.csv").open(encoding="utf-8")))
    assert sorted(row["n"] for row in rows if row["row"] == "configuration") == ["1", "3"]
    assert ppo in {row["run_id"] for row in rows if row["row"] == "run"}
    assert "1 finished run never logged it: left out." in (tmp_path / "cmp" / "compare.html").read_text()


def test_a_comparison_written_again_into_its_folder_leaves_no_plot_of_the_last_one(
    tmp_path: Path, cli
) -> None:
    uri, client, experiment = _store(tmp_path)
    _run(client, experiment, {"agent.lr": "0.1", "seed": "0"}, [1.0])
    out = tmp_path / "cmp"
    (out).mkdir()
    (out / "compare.html").write_text("an earlier comparison")
    (out / "seeds_improvement.png").write_bytes(b"an earlier plot")
    r = cli("compare", f"tracking.uri={uri}", "--out", str(out))
    assert r.returncode == 0, r.output
    page = (out / "compare.html").read_text()  # one run, one seed: the page claims no best configuration
    assert "Highest single run:" in page and "none is best" in page and "Best run" not in page
    assert not (out / "seeds_improvement.png").exists() or (out / "seeds_improvement.png").read_bytes() != (
        b"an earlier plot"
    )


def test_a_killed_run_that_never_evaluated_is_said_so_without_a_metric_it_was_not_asked(
    tmp_path: Path, cli
) -> None:
    uri, client, experiment = _store(tmp_path)
    run = client.create_run(experiment).info.run_id
    client.log_param(run, "objective.metric", OBJECTIVE)
    client.log_metric(run, "eval_untrained/return_mean", 9.0, step=0)
    client.set_terminated(run, "KILLED")
    r = cli("compare", run, f"tracking.uri={uri}")
    assert r.returncode == 1 and "did you mean" not in r.stderr and "--metric eval" not in r.stderr
    assert f"no run logged {OBJECTIVE}, the runs' objective (objective.metric)" in r.stderr, r.stderr
