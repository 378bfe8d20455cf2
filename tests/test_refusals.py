"""A user's mistakes are refused before anything starts: exit status 1, one message naming the bad
value and the closest valid one, no traceback, no run in the MLflow store and no run folder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import CliResult, free_port, too_wide


def assert_refused(r: CliResult, *fragments: str) -> None:
    assert r.returncode == 1, r.output[-3000:]
    assert "Traceback" not in r.output, r.output[-3000:]
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    # Printed in lines that fit 100 columns, the first still the one to grep: `Error:` and its start.
    printed = r.printed_stderr.splitlines()
    assert not too_wide(r.printed_stderr) and printed[0] == lines[0][: len(printed[0])], printed


def assert_no_run(tmp_path: Path) -> None:
    # Nor the folder Hydra made for the run: a refused command leaves nothing behind.
    for folder in ("outputs", "multirun"):  # a refused sweep leaves no sweep folder either
        assert not (tmp_path / folder).exists(), sorted(map(str, (tmp_path / folder).rglob("*")))
    db = tmp_path / "mlflow.db"
    if db.exists():
        client = MlflowClient(tracking_uri=f"sqlite:///{db}")
        assert not client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_an_unknown_atari_game_names_the_closest(cli, tmp_path: Path) -> None:
    started = time.monotonic()
    r = cli("env=atari", "env.game=Pnog")
    assert_refused(r, "Unknown Atari game env.game='Pnog'", "Closest: Pong")
    assert time.monotonic() - started < 30
    assert_no_run(tmp_path)


def test_a_misspelled_override_of_an_existing_section_names_the_closest_key(cli, tmp_path: Path) -> None:
    r = cli("agent=ppo", "agent.hyperparams.lerning_rate=0.1")
    assert_refused(
        r,
        "Unknown config key agent.hyperparams.lerning_rate.",
        "Did you mean agent.hyperparams.learning_rate?",
    )
    assert_no_run(tmp_path)


@pytest.mark.parametrize(
    ("args", "hint"),
    [  # another library's name of a key, and where the key goes: the form that is taken, `+` and all
        (["agent.lr=3e-4"], "Did you mean agent.learning_rate?"),
        (["agent=ppo", "agent.lr=3e-4"], "Did you mean agent.hyperparams.learning_rate?"),
        (["agent=sb3", "agent.lr=3e-4"], "Did you mean +agent.hyperparams.lr=VALUE? The + adds"),
        (["agent=sb3", "+agent.hyperparams.lr=3e-4"], "Did you mean +agent.hyperparams.learning_rate?"),
        (["n_envs=4"], "Did you mean env.n_envs?"),  # a section's key given at the root
        (["agent=ppo", "lr=1e-3"], "Did you mean agent.hyperparams.learning_rate?"),
    ],
)
def test_a_key_by_another_librarys_name_is_pointed_to_ours(cli, tmp_path: Path, args, hint) -> None:
    assert_refused(cli(*args), hint)
    assert_no_run(tmp_path)


def test_an_unknown_resume_target_names_the_newest_runs_and_a_run_never_checkpointed_says_so(
    cli, tmp_path: Path
) -> None:
    from tests.conftest import FAST

    # DQN's train phases cut to 8 updates (of 128): what the run learns is not read here.
    first_run = [*FAST, "agent.gradient_steps=8", "tracking.run_name=first", "hydra.run.dir=first"]
    assert cli(*first_run).returncode == 0
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (first,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    r = cli(f"resume={first.info.run_id[:-1]}x")  # one character off
    assert_refused(
        r,
        f"resume='{first.info.run_id[:-1]}x' is neither a run directory nor a tracked run",
        f"Did you mean {first.info.run_id} (first, FINISHED)?",
    )
    assert len(client.search_runs([first.info.experiment_id])) == 1
    # A run stopped before its first checkpoint (its disk full, kill -9): the refusal said its run
    # directory was gone though it was there, and left a new run directory with an empty checkpoint.
    run_dir = tmp_path / "outputs" / "stopped"
    run_dir.mkdir(parents=True)
    run = client.create_run(
        first.info.experiment_id, run_name="stopped-early", tags={"framework.run_dir": str(run_dir)}
    )
    client.set_terminated(run.info.run_id, "FAILED")
    r = cli(f"resume={run.info.run_id}", "total_steps=300")
    said = " ".join(r.stderr.split())
    assert r.returncode == 1 and "Traceback" not in r.output, r.output
    assert said.endswith(f"and its run directory {run_dir} holds none"), said
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == ["stopped"]


def test_resume_of_nothing_in_a_fresh_directory_creates_no_store(cli, tmp_path: Path) -> None:
    r = cli("resume=doesnotexist")
    assert_refused(r, "resume='doesnotexist' is neither a run directory nor a tracked run")
    assert not (tmp_path / "mlflow.db").exists()
    # A path is not looked up as a run id: what is wrong with it is said.
    assert_refused(
        cli("resume=outputs/nope"), f"resume=outputs/nope: {tmp_path / 'outputs/nope'} does not exist"
    )
    (tmp_path / "latest").write_text("step_0000000100")
    assert_refused(cli("resume=./latest"), f"resume=./latest: {tmp_path / 'latest'} is not a directory")
    assert not (tmp_path / "mlflow.db").exists()


def test_a_tracking_server_that_does_not_answer_is_refused_within_ten_seconds(cli, tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    r = cli(f"tracking.uri={uri}")
    assert time.monotonic() - started < 10 + 5  # the check's 5 s, and the interpreter's start
    assert_refused(
        r, f"tracking.uri={uri} does not answer", "mlflow server --host 127.0.0.1", "tracking=none"
    )
    assert not list(tmp_path.glob("outputs/*/*/checkpoints"))
    # A port only root may serve on: the server to start is on another, and so is the URI.
    said = "`mlflow server --host 127.0.0.1 --port 5000` and tracking.uri=http://127.0.0.1:5000"
    assert_refused(cli("tracking.uri=http://127.0.0.1:1"), said, "python -m framework ui")


def test_a_sqlite_store_in_a_missing_folder_is_refused(cli, tmp_path: Path) -> None:
    r = cli("tracking.uri=sqlite:///no/such/folder/mlflow.db")
    assert_refused(r, "the folder", "does not exist")
    assert not (tmp_path / "no").exists()
    # A URI missing its colon or a slash: said as such, not as a folder or an unreachable server.
    for typed, meant in (
        ("http//127.0.0.1:5123", "http://127.0.0.1:5123"),
        ("sqlite:/x.db", "sqlite:///x.db"),
    ):
        assert_refused(
            cli(f"tracking.uri={typed}"), f"tracking.uri={typed} is not a URI: did you mean {meant}?"
        )


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("env=cartpol",), ("env=cartpol is not a config of group env.", "Did you mean env=cartpole?")),
        (("env.n_env=2",), ("Unknown config key env.n_env.", "Did you mean env.n_envs?")),
        (
            ("agent.hidden_sizes=64",),
            ("agent.hidden_sizes", "a list, written in brackets: agent.hidden_sizes=[64]"),
        ),
        (("agent=ppo", "agent.algo=PP0"), ("Unknown SB3 algorithm agent.algo='PP0'.", "Did you mean PPO?")),
        (
            ("env=fighter", "env.opponent=bos"),
            ("env.opponent='bos' is not valid", "boss" if False else "idle"),
        ),
        (("progress=fancy",), ("progress='fancy' is not valid; choose one of auto, bar, log, off",)),
        (("agent=PPO",), ("agent=PPO is not a config of group agent.", "Did you mean agent=ppo?")),
        (
            ("total_steps=lots",),
            ("total_steps=lots must be an integer (a whole number, like total_steps=1000)",),
        ),
        (
            ("plugin",),
            ("'plugin' is neither a command nor an override", "Did you mean python -m framework plugins?"),
        ),
        (("seed=-1",), ("seed=-1 must be in [0, 4294967295] (default 0)",)),
        (("device=gpu",), ("device='gpu' is not valid; choose auto", "cpu, cuda or cuda:N")),
        (("device=cuda:7",), ("device=cuda:7", "GPU")),  # no GPU here, or fewer than 8
        (
            ("buffer=memory_efficient",),
            ("agent.n_step=3 needs a buffer of whole transitions (buffer=replay)",),
        ),
        (
            ("agent=ppo", "agent.hyperparams.learning_rate=lin_abc"),
            ("lin_<x> needs a number, e.g. lin_0.001",),
        ),
        (
            ("agent=ppo", "agent.hyperparams.n_epochs=abc"),
            ("agent.hyperparams.n_epochs='abc' is not valid: it is an integer",),
        ),
        (
            ("agent=ppo", "+agent.policy_kwargs.activation_fn=relux"),
            ("activation_fn='relux' is not valid", "Did you mean ReLU?"),
        ),
        (
            ("experiment=gomoku_6x6", "search=ray_async", f"ray.address=127.0.0.1:{free_port()}"),
            ("no Ray cluster answers there", "leave ray.address unset for a local Ray"),
        ),
        (("ray.address=headnode",), ("ray.address=headnode is not an address: give host:port",)),
        (
            ("experiment=gomoku_6x6", "search=ray_async", "ray.num_cpus=-2"),
            ("ray.num_cpus=-2 must be >= 1, or null (default null)",),
        ),
        (("ray.num_gpus=-1",), ("ray.num_gpus=-1 must be >= 0, or null (default null)",)),
        (("ray.init_timeout_s=0",), ("ray.init_timeout_s=0 must be > 0 (default 120)",)),
        (
            ("experiment=gomoku_6x6", "search=ray_async", "search.batch_size=0"),
            ("search.batch_size=0 must be >= 1",),
        ),
        (
            ("experiment=gomoku_6x6", "search=ray_asnyc"),
            ("search=ray_asnyc is not a config of group search.", "Did you mean search=ray_async?"),
        ),
        (
            ("experiment=gomoku_6x6", "search=ray_async", "search.batch_sise=8"),
            ("search.batch_sise", "Did you mean search.batch_size?"),
        ),
    ],
)
def test_other_mistakes_are_one_message(
    cli, tmp_path: Path, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    assert_refused(cli(*args), *fragments)
    assert_no_run(tmp_path)


def test_a_ray_address_where_something_else_listens_is_refused_at_once(cli, tmp_path: Path) -> None:
    from tests.test_ray_runtime import http_server

    with http_server() as address:
        started = time.monotonic()
        r = cli("experiment=gomoku_6x6", "search=ray_async", f"ray.address={address}")
    assert_refused(r, f"ray.address={address}: no Ray cluster answers there (something else answers there")
    assert time.monotonic() - started < 30  # the start of Python and Hydra; the check itself < 3 s
    assert_no_run(tmp_path)


def test_hydra_full_error_shows_the_traceback(cli) -> None:
    r = cli("env=atari", "env.game=Pnog", env={"HYDRA_FULL_ERROR": "1"})
    assert r.returncode == 1
    assert "Traceback" in r.stderr and "ConfigError: Unknown Atari game" in r.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["seed=range(5,2)"], "Error: seed=range(5,2) sweeps no value, so the sweep has no job"),
        (
            ["hydra/sweeper=optuna", "agent.hyperparams.learning_rate=range(3,3)"],
            "Error: hydra/sweeper=optuna: 'agent.hyperparams.learning_rate=range(3,3)': the range is empty",
        ),
    ],
    ids=["grid", "optuna"],
)
def test_a_sweep_over_an_empty_range_is_refused_leaving_nothing(
    cli, tmp_path: Path, args: list[str], said: str
) -> None:
    """The grid launched no job, exited 0 and left a sweep folder; Optuna's refusal came after a
    callback's IndexError warning."""
    r = cli("-m", "total_steps=500", *args)
    assert r.returncode == 1 and "Traceback" not in r.output and "Warning" not in r.output, r.output
    assert r.stderr.startswith(said), r.stderr
    assert_no_run(tmp_path)


def test_a_sweep_whose_first_job_is_refused_leaves_no_parent_run(cli, tmp_path: Path) -> None:
    r = cli("-m", "agent=ppo,dqm", "total_steps=500")
    assert r.returncode == 1 and "Did you mean agent=dqn?" in r.stderr
    assert "Traceback" not in r.output
    assert_no_run(tmp_path)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["agent.gamma=abc"],
            "Error: agent.gamma=abc must be a number (like agent.gamma=0.5 or agent.gamma=1e-3)",
        ),
        (["env=lunarlander", "env.continuous=maybe"], "Error: env.continuous=maybe must be true or false"),
        (
            ["agent.batch_size=1e2"],
            "Error: agent.batch_size=1e2 must be an integer: write agent.batch_size=100",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_said_as_what_its_key_takes(
    cli, tmp_path: Path, args: list[str], said: str
) -> None:
    """OmegaConf's own words were passed on: "Value 'abc' of type 'str' could not be converted to Float"."""
    r = cli(*args, "total_steps=300")
    assert r.returncode == 1 and r.stderr.strip() == said, r.output
    assert_no_run(tmp_path)


@pytest.mark.parametrize(
    ("args", "adds"),
    [
        (["nosuch=1"], False),
        (["agent.nosuch=1"], False),
        (["agent=ppo", "agent.policy_kwargs.nosuch=1"], True),
    ],
)
def test_an_unknown_key_offers_adding_it_only_where_a_key_can_be_added(
    cli, tmp_path: Path, args: list[str], adds: bool
) -> None:
    """`+nosuch=1` was offered for the root and a plugin's own keys, and then refused too."""
    r = cli(*args, "total_steps=300")
    said = " ".join(r.stderr.split())
    assert r.returncode == 1 and said.startswith(f"Error: Unknown config key {args[-1].split('=')[0]}"), said
    assert (f"`+{args[-1].split('=')[0]}=VALUE` adds a key" in said) is adds, said
    assert_no_run(tmp_path)


# A mistake only the started run sees (one message and a FAILED run): tests/test_lifecycle.py's
# test_exception_ends_failed_with_one_message_and_the_traceback.


def test_a_tracking_process_asked_nothing_ends_at_once_and_one_asked_something_ends_by_closing() -> None:
    # A run refused before it is tracked closes a tracking process it asked nothing: nothing to
    # flush, so its start (MLflow's import, a second or more) is not waited for.
    import signal

    from framework_plugins.trackers.tracking_process import TrackingProcess

    idle = TrackingProcess("collections:OrderedDict")
    idle.close()
    assert idle.process.wait(timeout=10) == -signal.SIGKILL
    asked = TrackingProcess("collections:OrderedDict")
    assert asked.call("__len__", timeout=120) == 0
    asked.close()
    assert asked.process.wait(timeout=30) == 0  # ended by its CLOSE, once it had answered


def test_a_key_given_outside_the_mapping_that_takes_it_is_pointed_there(cli, tmp_path: Path) -> None:
    r = cli("agent=sb3_dqn", "agent.learning_starts=5")
    said = " ".join(r.stderr.split())
    assert said.startswith(
        "Error: Unknown config key agent.learning_starts. Did you mean agent.hyperparams.learning_starts?"
    ), said
    assert_no_run(tmp_path)
