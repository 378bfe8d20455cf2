"""A new SQLite store is a copy of an empty one that MLflow built once: the same schema as MLflow's own
new store, its Default experiment in its own directory, never over a store that is there, and
MLflow's own way when no copy can be made."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import sqlalchemy
from mlflow.tracking import MlflowClient

from framework_plugins.trackers import store_template
from framework_plugins.trackers.mlflow_session import MlflowSession


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(store_template.CACHE_ENV, str(folder))
    return folder


def schema(path: Path) -> tuple[dict[str, list[str]], str]:
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        inspector = sqlalchemy.inspect(engine)
        tables = {t: sorted(c["name"] for c in inspector.get_columns(t)) for t in inspector.get_table_names()}
        with engine.connect() as connection:
            (revision,) = connection.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).one()
    finally:
        engine.dispose()
    return tables, str(revision)


def test_a_placed_store_has_mlflows_own_schema_and_its_default_experiment_here(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    ours.parent.mkdir()
    theirs.parent.mkdir()
    assert store_template.place(ours)
    assert len(list(cache.glob("mlflow-*.db"))) == 1
    MlflowClient(f"sqlite:///{theirs}").search_experiments()  # MLflow builds this one itself
    assert schema(ours) == schema(theirs)
    monkeypatch.chdir(ours.parent)
    client = MlflowClient(f"sqlite:///{ours}")
    (default,) = client.search_experiments()
    assert default.name == "Default" and default.artifact_location == str(ours.parent / "mlruns" / "0")
    run = client.create_run(client.create_experiment("x"))
    client.log_metric(run.info.run_id, "m", 1.0)
    assert client.get_run(run.info.run_id).data.metrics == {"m": 1.0}
    assert [p.name for p in ours.parent.iterdir() if p.name.startswith(".")] == []


def test_a_store_that_is_there_is_left_as_it_is(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "mlflow.db"
    path.write_bytes(b"not a store")
    assert store_template.place(path)
    assert path.read_bytes() == b"not a store"


def _place(path: str) -> bool:
    return store_template.place(Path(path))


def test_processes_placing_one_store_at_once_leave_one_whole_store(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "mlflow.db"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert all(pool.map(_place, [str(path)] * 8))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "mlflow.db"]
    assert sorted(p.name for p in cache.iterdir()) == [next(cache.glob("mlflow-*.db")).name]
    assert MlflowClient(f"sqlite:///{path}").search_experiments()[0].name == "Default"


@pytest.fixture
def unusable_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache that cannot be written: no template, MLflow builds each new store itself."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(store_template.CACHE_ENV, str(blocked / "cache"))


@pytest.mark.usefixtures("unusable_cache")
def test_without_a_usable_cache_mlflow_builds_the_store(tmp_path: Path) -> None:
    path = tmp_path / "mlflow.db"
    assert not store_template.place(path)
    assert not path.exists()
    session = MlflowSession(f"sqlite:///{path}", "framework", flush_every_s=1.0)
    assert session.client.search_experiments()[0].name == "Default"


def _start_a_run(uri: str) -> str:
    session = MlflowSession(uri, "framework", flush_every_s=1.0)
    ids = session.start_run(run_name="first", tags={})
    session.end_run("FINISHED")
    return ids["run_id"]


@pytest.mark.usefixtures("unusable_cache")
def test_processes_starting_the_first_runs_of_one_new_store_at_once_all_start(tmp_path: Path) -> None:
    # Without a template each process has MLflow build the schema; two builds of one file at once
    # fail ("Online migration expected to match one row").
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        ids = pool.map(_start_a_run, [uri] * 6)
    assert len(set(ids)) == 6
    client = MlflowClient(uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "framework"]
    assert len(client.search_runs([experiment.experiment_id])) == 6
