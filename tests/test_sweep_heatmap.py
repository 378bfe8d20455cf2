"""A sweep's summary beyond its objective: a table column per `objective.also` metric and, when two
settings are swept, a heat map per metric on the parent run."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from framework.contracts import SweepSummarySpec
from plugins.trackers import sweep_summary
from plugins.trackers.mlflow_session import MlflowSession
from plugins.trackers.sweep_child import Child

BATCH, WAIT = "search.batch_size", "search.max_wait_ms"
OBJECTIVE, SIMS = "eval/return_mean", "perf/sims_per_s"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: The colour of a cell no run logged the metric for (the colour map's "bad" colour).
GREY = (217, 217, 217)


def children(*, seeds: tuple[int, ...] = (), missing: tuple[str, str] | None = None) -> list[Child]:
    """batch_size × max_wait_ms (× seed): the objective is batch + wait + seed, sims/s ten times batch;
    the `missing` cell's runs logged neither."""
    out = []
    for batch, wait, seed in itertools.product((8, 32, 128), (1, 5, 20), seeds or (None,)):
        params = {BATCH: str(batch), WAIT: str(wait)}
        if seed is not None:
            params["seed"] = str(seed)
        lost = missing == (str(batch), str(wait))
        out.append(
            Child(
                run_id=f"id-{batch}-{wait}-{seed}",
                name=" ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in params.items()),
                status="FAILED" if lost else "FINISHED",
                duration_s=1.5,
                params=params,
                objective=None if lost else float(batch + wait + (seed or 0)),
                also={SIMS: None if lost else 10.0 * batch},
            )
        )
    return out


def keys(seeds: bool = False) -> list[str]:
    return [BATCH, WAIT, *(["seed"] if seeds else [])]


def grey_pixels(path: Path) -> int:
    import matplotlib.image

    rgb = (matplotlib.image.imread(path)[..., :3] * 255).round().astype(int)
    return int(np.all(rgb == GREY, axis=-1).sum())


def test_the_grid_is_in_numeric_order_with_the_mean_over_seeds_and_a_hole_where_runs_logged_nothing() -> None:
    runs = children(seeds=(1, 2), missing=("32", "5"))
    xs, ys, rows = sweep_summary.heatmap_grid(runs, BATCH, WAIT, OBJECTIVE, OBJECTIVE)
    assert xs == ["8", "32", "128"] and ys == ["1", "5", "20"]  # not "128" < "32" < "8"
    assert rows[0] == [8 + 1 + 1.5, 32 + 1 + 1.5, 128 + 1 + 1.5]  # seeds 1 and 2: + 1.5 on average
    assert rows[1][1] is None and rows[1][0] == 8 + 5 + 1.5
    _, _, sims = sweep_summary.heatmap_grid(runs, BATCH, WAIT, SIMS, OBJECTIVE)
    assert sims[2] == [80.0, 320.0, 1280.0] and sims[1][1] is None


def test_values_that_are_not_numbers_are_in_text_order(tmp_path: Path) -> None:
    runs = [
        Child(f"id{i}", f"r{i}", "FINISHED", 1.0, {"act": act, "net": net}, float(i))
        for i, (act, net) in enumerate(itertools.product(("tanh", "elu", "relu"), ("mlp", "cnn", "auto")))
    ]
    xs, ys, rows = sweep_summary.heatmap_grid(runs, "act", "net", OBJECTIVE, OBJECTIVE)
    assert xs == ["elu", "relu", "tanh"] and ys == ["auto", "cnn", "mlp"]
    assert rows[0] == [5.0, 8.0, 2.0]  # net=auto: elu (i=5), relu (i=8), tanh (i=2)
    paths = sweep_summary.plot_heatmaps(runs, ["act", "net"], OBJECTIVE, tmp_path)
    assert [p.name for p in paths] == ["heatmap_eval_return_mean.png"]
    assert paths[0].read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("seeds", [(), (1, 2)], ids=["no-seeds", "seeds"])
def test_a_heat_map_per_metric_over_two_swept_settings(tmp_path: Path, seeds: tuple[int, ...]) -> None:
    runs = children(seeds=seeds)
    paths = sweep_summary.plot_heatmaps(runs, keys(bool(seeds)), OBJECTIVE, tmp_path, also=[SIMS, OBJECTIVE])
    assert [p.name for p in paths] == ["heatmap_eval_return_mean.png", "heatmap_perf_sims_per_s.png"]
    for path in paths:
        assert path.parent == tmp_path and path.read_bytes().startswith(PNG_MAGIC)
        assert grey_pixels(path) < 200  # every cell has a value: no grey ones


def test_a_cell_no_run_logged_is_grey(tmp_path: Path) -> None:
    runs = children(seeds=(1, 2), missing=("32", "5"))
    (objective, sims) = sweep_summary.plot_heatmaps(runs, keys(True), OBJECTIVE, tmp_path, also=[SIMS])
    assert (
        grey_pixels(objective) > 2000 and grey_pixels(sims) > 2000
    )  # one of nine cells, about 60 by 50 pixels


def test_no_heat_map_unless_exactly_two_settings_are_swept(tmp_path: Path) -> None:
    runs = children(seeds=(1, 2))
    assert sweep_summary.plot_heatmaps(runs, [BATCH, "seed"], OBJECTIVE, tmp_path, also=[SIMS]) == []
    three = [dataclasses.replace(c, params={**c.params, "gamma": "0.9"}) for c in runs]
    assert sweep_summary.plot_heatmaps(three, [*keys(True), "gamma"], OBJECTIVE, tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_a_metric_no_run_logged_gets_no_heat_map(tmp_path: Path) -> None:
    paths = sweep_summary.plot_heatmaps(children(), keys(), OBJECTIVE, tmp_path, also=["train/nowhere"])
    assert [p.name for p in paths] == ["heatmap_eval_return_mean.png"]


def test_heat_map_names_are_file_names() -> None:
    assert sweep_summary.heatmap_name("perf/sims_per_s") == "heatmap_perf_sims_per_s.png"
    assert sweep_summary.heatmap_name("a b/c:d") == "heatmap_a_b_c_d.png"


def test_the_table_has_a_column_per_also_metric(tmp_path: Path) -> None:
    runs = children(missing=("32", "5"))
    csv_path, html_path = sweep_summary.write_table(runs, keys(), OBJECTIVE, tmp_path, also=[SIMS, OBJECTIVE])
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert list(rows[0]) == ["row", "run", "run_id", BATCH, WAIT, OBJECTIVE, SIMS, "status", "duration_s"]
    by_cell = {(r[BATCH], r[WAIT]): r for r in rows}
    assert by_cell["128", "20"][SIMS] == "1280" and by_cell["128", "20"][OBJECTIVE] == "148"
    assert by_cell["32", "5"][SIMS] == "" and by_cell["32", "5"][OBJECTIVE] == ""
    page = html_path.read_text(encoding="utf-8")
    assert f"<th title='{SIMS}' class=n>{SIMS}</th>" in page and "<td class=n>1280</td>" in page


def test_the_summary_page_says_what_was_optimised_and_puts_the_best_first(tmp_path: Path) -> None:
    runs = children(missing=("32", "5"))
    links = {c.run_id: f"#/experiments/1/runs/{c.run_id}" for c in runs}
    csv_path, html_path = sweep_summary.write_table(
        runs, keys(), OBJECTIVE, tmp_path, mode="min", title="sweep batch_size wait", links=links,
        address="http://127.0.0.1:5000",
    )  # fmt: skip
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    # Lowest objective first (mode min), the run that failed last.
    assert [r["run_id"] for r in rows[:2]] == ["id-8-1-None", "id-8-5-None"] and rows[-1][
        "status"
    ] == "FAILED"
    page = html_path.read_text(encoding="utf-8")
    assert "<h1>Sweep summary: sweep batch_size wait</h1>" in page
    assert f"Objective <b>{OBJECTIVE}</b> (min: lower is better)" in page
    assert "9 runs (1 FAILED, 8 FINISHED)" in page and "Best run: <b>batch_size=8 max_wait_ms=1</b>" in page
    best_row = page.split("<tr class=best>")[1].split("</tr>")[0]
    assert "&#9733; batch_size=8" in best_row
    assert (
        "<a href='http://127.0.0.1:5000/#/experiments/1/runs/id-8-1-None' "
        "data-run='#/experiments/1/runs/id-8-1-None' target='_blank' rel='noopener'>id-8-1-N</a>"
    ) in best_row
    assert "<td class=n>9</td>" in best_row  # numbers right-aligned
    assert page.count("<tr class=out>") == 1  # the failed run, greyed


def test_the_note_names_the_heat_maps_when_there_are_some() -> None:
    runs = children()
    top = sweep_summary.best(runs, "max")
    links = {c.run_id: f"#/runs/{c.run_id}" for c in runs}
    with_maps = sweep_summary.note(runs, top, OBJECTIVE, "max", links, ["heatmap_perf_sims_per_s.png"])
    assert "Heat maps" in with_maps and "heatmap_perf_sims_per_s.png" in with_maps
    assert "eat map" not in sweep_summary.note(runs, top, OBJECTIVE, "max", links)


def test_the_note_names_only_the_plots_that_were_drawn() -> None:
    runs = children()
    top = sweep_summary.best(runs, "max")
    links = {c.run_id: f"#/runs/{c.run_id}" for c in runs}
    table = ["sweep_summary.html", "sweep_summary.csv"]
    drawn = sweep_summary.note(runs, top, OBJECTIVE, "max", links, files=[*table, "objective.png"])
    assert "the objective across them: objective.png" in drawn
    assert "objective.png" not in sweep_summary.note(runs, top, OBJECTIVE, "max", links, files=table)
    study = {"study_name": "s", "states": {"COMPLETE": 1}, "storage": "optuna.db"}
    one = sweep_summary.note(runs, top, OBJECTIVE, "max", links, study={**study, "plots": ["slice"]})
    assert "its plots (slice) are under optuna/" in one and "param_importances" not in one
    none = sweep_summary.note(runs, top, OBJECTIVE, "max", links, study=study)
    assert "too few trials finished for its plots" in none and "optuna/plots.html" not in none


def test_the_parent_run_holds_the_heat_maps_and_the_wider_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through MlflowSession against a real SQLite store: children made as a sweep's jobs make them."""
    monkeypatch.chdir(tmp_path)  # the store's artifacts go to ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    session = MlflowSession(uri, "heat", flush_every_s=0.0)
    parent = session.start_parent(run_name="sweep", tags={}, params={}, start_time=time.time())
    client = MlflowClient(tracking_uri=uri)
    experiment = session._experiment_id()
    for c in children(seeds=(1, 2), missing=("128", "20")):
        run = client.create_run(experiment, run_name=c.name, tags={"mlflow.parentRunId": parent})
        for key, value in c.params.items():
            client.log_param(run.info.run_id, key, value)
        if c.objective is not None:
            client.log_metric(run.info.run_id, OBJECTIVE, c.objective - 100, step=0)  # not the last value
            client.log_metric(run.info.run_id, OBJECTIVE, c.objective, step=1)
            client.log_metric(run.info.run_id, SIMS, c.also[SIMS] or 0.0, step=1)
        client.set_terminated(run.info.run_id, c.status)
    spec = SweepSummarySpec(swept_keys=tuple(keys(True)), objective=OBJECTIVE, mode="max", also=(SIMS,))
    found = session.end_parent(parent, "FINISHED", dataclasses.asdict(spec), end_time=time.time())
    assert found["runs"] == 18 and found["statuses"] == {"FINISHED": 16, "FAILED": 2}
    assert {a.path for a in client.list_artifacts(parent)} == {
        "sweep_summary.csv", "sweep_summary.html", "objective.png",
        "heatmap_eval_return_mean.png", "heatmap_perf_sims_per_s.png",
        "seeds_curves.png", "seeds_profile.png", "seeds_improvement.png",
    }  # fmt: skip
    heatmap = Path(client.download_artifacts(parent, "heatmap_perf_sims_per_s.png", str(tmp_path)))
    assert heatmap.read_bytes().startswith(PNG_MAGIC) and grey_pixels(heatmap) > 2000
    table = Path(client.download_artifacts(parent, "sweep_summary.csv", str(tmp_path)))
    read = list(csv.DictReader(table.open(encoding="utf-8")))
    rows = {(r[BATCH], r[WAIT], r["seed"]): r for r in read if r["row"] == "run"}
    assert rows["32", "5", "2"][SIMS] == "320" and rows["32", "5", "2"][OBJECTIVE] == "39"
    # A row per configuration, its two seeds folded: the best (128, 5: 134 and 135) stands apart.
    configs = [r for r in read if r["row"] == "configuration"]
    assert len(configs) == 8 and configs[0]["run"] == "batch_size=128 max_wait_ms=5"
    best = [configs[0][k] for k in ("n", "iqm", "iqm_low", "iqm_high")]
    assert best == ["2", "134.5", "134", "135"]
    assert [c["best"] for c in configs] == ["yes"] + [""] * 7 and configs[0]["p_improve"] == "1"
    assert (configs[0]["median"], configs[0]["p_improve_low"], configs[0]["p_improve_high"]) == (
        "134.5",
        "1",
        "1",
    )
    assert rows["128", "20", "1"][SIMS] == "" and rows["128", "20", "1"]["status"] == "FAILED"
    data = client.get_run(parent).data
    assert data.metrics[f"best/{OBJECTIVE}"] == 128 + 5 + 2  # the best stays on the objective
    assert data.metrics[f"iqm/{OBJECTIVE}/batch_size 128 max_wait_ms 5"] == 134.5
    assert data.metrics[f"iqm_low/{OBJECTIVE}/batch_size 8 max_wait_ms 1"] == 10
    assert data.metrics[f"iqm_high/{OBJECTIVE}/batch_size 8 max_wait_ms 1"] == 11
    curves = Path(client.download_artifacts(parent, "seeds_curves.png", str(tmp_path)))
    assert curves.read_bytes().startswith(PNG_MAGIC)
    note = data.tags["mlflow.note.content"]
    assert "| ★ batch_size=128 max_wait_ms=5 | 2 | 134.5 [134, 135] |" in note
    assert data.tags["framework.best_child"] == "batch_size=128 max_wait_ms=5 seed=2"
    assert "heatmap_perf_sims_per_s.png" in data.tags["mlflow.note.content"]


@pytest.mark.slow
def test_a_two_by_two_sweep_gives_its_parent_a_heat_map_per_metric(cli, tmp_path: Path) -> None:
    """`python -m framework -m` over two settings of the default DQN on CartPole, with `objective.also`."""
    from tests.conftest import FAST

    r = cli(
        "-m", *FAST, "agent.batch_size=16,32", "agent.gamma=0.9,0.99",
        "objective.also=[perf/env_steps_per_s,train/loss]", timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "Sweep FINISHED: 4 runs (4 FINISHED)." in r.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (parent,) = [
        run
        for run in client.search_runs([client.get_experiment_by_name("framework").experiment_id])
        if "mlflow.parentRunId" not in run.data.tags
    ]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {
        "heatmap_eval_return_mean.png", "heatmap_perf_env_steps_per_s.png", "heatmap_train_loss.png",
    } <= artifacts  # fmt: skip
    table = Path(client.download_artifacts(parent.info.run_id, "sweep_summary.csv", str(tmp_path / "dl")))
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert len(rows) == 4 and all(float(row["perf/env_steps_per_s"]) > 0 for row in rows)
    assert "heatmap_train_loss.png" in parent.data.tags["mlflow.note.content"]


def test_a_child_that_did_not_finish_is_listed_but_left_out_of_the_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = children()
    # Its terminal closed mid-job: FAILED, with the value it had logged by then.
    runs[0] = dataclasses.replace(runs[0], status="FAILED", objective=999.0)
    drawn: list[tuple[list[str], str]] = []

    def heatmap(
        kids: list[Child], axes: tuple[str, str], metric: str, objective: str, title: str, folder: Path
    ):
        drawn.append(([c.run_id for c in kids], title))
        return folder / "x.png"

    monkeypatch.setattr(sweep_summary, "_heatmap", heatmap)
    sweep_summary.plot_heatmaps(runs, keys(), OBJECTIVE, tmp_path)
    ((ids, title),) = drawn
    assert runs[0].run_id not in ids and title == f"{OBJECTIVE} (8 runs)"
    assert sweep_summary.best(runs, "max") is not runs[0]
    csv_path, _ = sweep_summary.write_table(runs, keys(), OBJECTIVE, tmp_path)
    assert runs[0].run_id in csv_path.read_text()


def test_a_plots_title_counts_the_seeds_each_point_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lr 0.1 over seeds 0-2, lr 0.01 over seeds 0-3: "3-4 seeds", not the 4 seeds of the sweep."""
    from matplotlib.axes import Axes

    from plugins.trackers.sweep_child import Child

    titles: list[str] = []
    monkeypatch.setattr(Axes, "set_title", lambda self, text, **kw: titles.append(text))
    children = [
        Child(f"r{lr}{s}", f"r{lr}{s}", "FINISHED", 1.0, {"agent.lr": lr, "seed": str(s)}, float(s))
        for lr, seeds in (("0.1", 3), ("0.01", 4))
        for s in range(seeds)
    ]
    assert sweep_summary.plot_objective(children, ["agent.lr", "seed"], "eval/return_mean", tmp_path)
    assert titles == [
        "eval/return_mean across the sweep (7 runs, mean over 3-4 seeds; bars: the lowest and the "
        "highest run)"
    ]


def test_an_axis_of_drawn_values_shows_them_as_the_table_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Optuna draw (0.004148466620832118) is a tick of 4 digits, slanted where there are many."""
    from matplotlib.axes import Axes

    from plugins.trackers.sweep_child import Child

    ticks: list[tuple[list[str], dict]] = []
    monkeypatch.setattr(Axes, "set_xticks", lambda self, at, labels, **kw: ticks.append((list(labels), kw)))
    lrs = [f"0.00{i}148466620832118" for i in range(1, 9)]
    children = [Child(lr, lr, "FINISHED", 1.0, {"agent.lr": lr}, float(i)) for i, lr in enumerate(lrs)]
    assert sweep_summary.plot_objective(children, ["agent.lr"], "eval/return_mean", tmp_path)
    ((labels, kw),) = ticks
    assert labels == [f"0.00{i}148" for i in range(1, 9)] and kw["rotation"] == 40
