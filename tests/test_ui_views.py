"""`python -m framework ui`: what it opens: the runs sorted by the objective with the swept params as
columns (by the address where the store is read-only), a run by the eight characters pages show of
its id, a comparison page apart from the command that writes one; without a store, how to make one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from framework_plugins.trackers import store_template
from tests.test_ui import ctrl_c_ui, start_ui, ui_address

LR, EPOCHS = "agent.hyperparams.learning_rate", "agent.hyperparams.n_epochs"
OBJECTIVE = "eval/return_mean"


def test_ui_without_a_store_says_how_to_make_one(cli: Any, tmp_path: Path) -> None:
    r = cli("ui", "--no-browser")
    assert r.returncode == 1 and "Traceback" not in r.output
    assert "no runs at" in r.stderr and "python -m framework" in r.stderr
    assert not (tmp_path / "mlflow.db").exists()
    # A store of another folder: the command that makes it, that folder first where it is missing.
    elsewhere = cli("ui", "--no-browser", "tracking.uri=sqlite:///runs/mlflow.db")
    said = " ".join(elsewhere.stderr.split())
    assert (
        f"first tracked run: mkdir -p {tmp_path / 'runs'} && python -m framework "
        f"tracking.uri=sqlite:///{tmp_path / 'runs/mlflow.db'})" in said
    ), said
    wrong = cli("ui", "env=cartpole")
    said = " ".join(wrong.stderr.split())
    assert wrong.returncode == 1 and said == (
        "Error: env=cartpole: `ui` takes --port, --no-browser, --run and the overrides tracking.uri=... and "
        "tracking.experiment=..."
    ), said


def _swept_store(root: Path) -> str:
    """A store whose experiment `framework` holds a run of its own and a sweep over LR and EPOCHS
    (its parent tagged as SweepParentRun tags it); returns the experiment's id."""
    from mlflow.tracking import MlflowClient

    store_template.place(root / "mlflow.db")  # the empty schema copied, as a run makes a new store
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.create_experiment("framework")
    single = client.create_run(experiment, run_name="cartpole-dqn-s0")
    client.log_param(single.info.run_id, "objective.metric", OBJECTIVE)
    client.log_metric(single.info.run_id, OBJECTIVE, 120.0)
    client.set_terminated(single.info.run_id)
    spec = {"swept_keys": [LR, EPOCHS], "objective": OBJECTIVE, "mode": "max", "also": [], "study_dir": None}
    parent = client.create_run(
        experiment,
        run_name="sweep lr=1e-4,1e-3 ne=5,10 cartpole-sb3-ppo-s0",
        tags={
            "framework.swept_keys": json.dumps([LR, EPOCHS]),
            "framework.objective": OBJECTIVE,
            "framework.summary_spec": json.dumps(spec),
        },
    ).info.run_id
    for (lr, ne), score in zip(
        itertools.product(("1e-4", "1e-3"), ("5", "10")), (300, 480, 150, 60), strict=True
    ):
        child = client.create_run(
            experiment, run_name=f"lr={lr} ne={ne} cartpole-sb3-ppo-s0", tags={"mlflow.parentRunId": parent}
        ).info.run_id
        for key, value in (
            (LR, lr),
            (EPOCHS, ne),
            ("objective.metric", OBJECTIVE),
            ("objective.mode", "max"),
        ):
            client.log_param(child, key, value)
        client.log_metric(child, OBJECTIVE, float(score))
        client.set_terminated(child)
    client.set_terminated(parent)
    return str(experiment)


@pytest.mark.slow
def test_ui_opens_the_runs_sorted_by_the_objective_with_the_swept_params_as_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow 3.17 reads no columns from an address: `ui` writes the view as MLflow's Share button does
    (an experiment tag the address names) and opens it; in Chromium at 1400 px the runs come in the
    model-training view, best first, with the objective and both swept params as columns."""
    from mlflow.tracking import MlflowClient

    from tests.fighter.cdp import InspectedPage

    experiment = _swept_store(tmp_path)  # from the suite's cache, before this test's is set
    monkeypatch.setenv("FRAMEWORK_CACHE_DIR", str(tmp_path / "cache"))
    first = start_ui(tmp_path)
    try:
        address = ui_address(first)
        assert f"#/experiments/{experiment}/runs?workflowType=machine_learning&viewStateShareKey=" in address
        key = address.rsplit("viewStateShareKey=", 1)[1]
        tags = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_experiment(experiment).tags
        state = json.loads(tags[f"mlflow.sharedViewState.{key}"])
        metric = f"metrics.`{OBJECTIVE}`"
        assert state["selectedColumns"] == [metric, f"params.`{LR}`", f"params.`{EPOCHS}`"]
        assert state["orderByKey"] == metric and state["orderByAsc"] is False
        page = InspectedPage(address, width=1400, height=900)
        try:
            rows = f"document.querySelectorAll('.ag-center-cols-container .ag-row [col-id=\"{metric}\"]')"
            page.wait_in_page(f"{rows}.length >= 5", timeout=120)
            headers = page.steady(
                "Array.from(document.querySelectorAll('.ag-header-cell')).map(h => h.getAttribute('col-id'))"
            )
            scores = page.steady(  # the rows' order once they stop moving
                "Array.from(document.querySelectorAll('.ag-center-cols-container .ag-row'))"
                ".sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'))"
                f".map(r => (r.querySelector('[col-id=\"{metric}\"]') || {{}}).innerText)"
            )
            text = page.evaluate("document.body.innerText")
            page.screenshot(tmp_path / "ui.png")
        finally:
            page.close()
        assert {metric, f"params.`{LR}`", f"params.`{EPOCHS}`"} <= set(headers), headers
        assert scores[:5] == ["480", "300", "150", "120", "60"], scores  # best first
        assert "Sort: eval/return_mean" in text and "Model training" in text and "Evaluation runs" not in text
    finally:
        ctrl_c_ui(first)


@pytest.mark.slow
def test_a_store_ui_cannot_write_to_is_opened_sorted_by_the_objective(tmp_path: Path) -> None:
    """Where the view cannot be written (a read-only store), the address itself sorts the runs, best
    first: MLflow 3.17 reads `orderByKey` and `orderByAsc` from it (not columns)."""
    from framework_plugins.trackers.ui import _page
    from tests.test_readonly_store import read_only

    experiment = _swept_store(tmp_path)
    with read_only(tmp_path):
        page = _page(f"sqlite:///{tmp_path / 'mlflow.db'}", "framework", None)
    assert page == (
        f"#/experiments/{experiment}/runs?workflowType=machine_learning"
        "&orderByKey=metrics.%60eval%2Freturn_mean%60&orderByAsc=false"
    )


def test_ui_opens_a_run_by_the_eight_characters_pages_show_of_its_id(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from framework_plugins.trackers.ui import _compared, _page

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("cmpE")
    run = client.create_run(experiment).info.run_id
    assert (
        _page(uri, "framework", run[:8])
        == f"#/experiments/{experiment}/runs/{run}?workflowType=machine_learning"
    )
    # Its comparison is of its own experiment's runs, not the config's default experiment's.
    assert _compared(uri, "framework", run[:8]).startswith("python -m framework compare cmpE ")


def test_ui_labels_a_comparison_page_and_the_command_that_would_write_one_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from framework_plugins.trackers.ui import _show

    _show("http://127.0.0.1:5000", "#/", True, "python -m framework compare framework")
    _show("http://127.0.0.1:5000", "#/", True, "file:///tmp/compare.html")
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "  compare with python -m framework compare framework"
    assert lines[3] == "  compared     file:///tmp/compare.html"
