"""The command line: lazy imports, Hydra's own flags, and config errors that name the bad key."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "ray", "stable_baselines3", "mlflow", "onnxruntime", "onnx")


def imported_modules(*args: str, cwd: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Top-level modules imported by `python -m framework ARGS`, from -X importtime."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "framework", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    names = set()
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names, p


@pytest.mark.parametrize("args", [("plugins",), ("--help",), ("--cfg", "job", "env=atari", "agent=dqn")])
def test_listing_help_and_composition_import_neither_torch_nor_ray(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    modules, p = imported_modules(*args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "framework" in modules
    assert not modules & set(HEAVY), modules & set(HEAVY)


def test_a_run_that_uses_no_ray_imports_none_of_it(tmp_path: Path) -> None:
    """Ray is a resource of the runs that search with it; the default DQN on CartPole never loads it."""
    modules, p = imported_modules(
        "total_steps=256", "eval.episodes=1", "tracking=none", "progress=log", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Run FINISHED at step 256" in p.stdout
    assert "torch" in modules  # the whole run was watched: its agent's imports are there
    assert "ray" not in modules


def test_plugins_lists_each_plugin_with_the_configs_that_select_it(cli) -> None:
    r = cli("plugins", env={"COLUMNS": "240"})
    assert r.returncode == 0, r.output
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["KIND", "NAME", "SELECTED", "BY", "DISTRIBUTION", "VERSION", "DESCRIPTION"]
    sb3 = next(row for row in rows if row.split()[:2] == ["agent", "sb3"])
    assert sb3.split()[2:5] == ["agent=a2c|ppo|qrdqn|sac|sb3|sb3_dqn|td3|tqc|trpo", "framework", "0.1.0"]
    assert "Stable-Baselines3" in sb3
    dqn = next(row for row in rows if row.split()[:2] == ["agent", "dqn"])
    assert dqn.split()[2] == "agent=dqn"
    optuna = next(row for row in rows if row.split()[:2] == ["sweeper", "optuna"])
    assert optuna.split()[2] == "hydra/sweeper=optuna"
    ray = next(row for row in rows if row.split()[:2] == ["service", "ray"])
    assert ray.split()[2] == "ray.*"


def test_plugins_fits_the_terminals_width_by_wrapping_selectors_and_descriptions(cli) -> None:
    r = cli("plugins", env={"COLUMNS": "90"})
    assert r.returncode == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 90, "\n".join(line for line in lines if len(line) > 90)
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["agent", "sb3"])
    rows = [lines[start], *itertools.takewhile(lambda line: line.startswith(" "), lines[start + 1 :])]
    # The row's selector goes on in its column, on lines of its own; the description goes under it.
    column = lines[0].index("SELECTED BY")
    selector = "".join(
        line[column:].split()[0] for line in rows if line is rows[0] or not line[:column].strip()
    )
    assert selector == "agent=a2c|ppo|qrdqn|sac|sb3|sb3_dqn|td3|tqc|trpo", rows
    assert "Stable-Baselines3" in " ".join(" ".join(rows).split())


def test_plugins_marks_configs_whose_optional_dependency_is_missing(cli, tmp_path: Path) -> None:
    """A config file's `# requires: MODULE (how to install)` line is checked without importing anything."""
    site = tmp_path / "site"
    (site / "fancy_conf" / "agent").mkdir(parents=True)
    (site / "fancy_conf" / "__init__.py").write_text("")
    (site / "fancy_conf" / "agent" / "fancy.yaml").write_text(
        "# requires: no_such_module_here (pip install fancy-extra)\n"
        "defaults:\n  - /schema_agent_sb3@_here_\n  - _self_\nalgo: A2C\n"
    )
    info = site / "fancy_conf-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fancy-conf\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[framework.conf]\nfancy = fancy_conf\n")
    r = cli("plugins", env={"PYTHONPATH": str(site)})
    assert r.returncode == 0, r.output
    sb3 = next(row for row in r.stdout.splitlines() if row.split()[:2] == ["agent", "sb3"])
    assert "|fancy*|" in sb3 and "|ppo|" in sb3
    assert "* needs no_such_module_here, which is not installed: pip install fancy-extra" in r.stdout


def test_plugins_marks_an_entry_point_whose_module_is_not_there(cli, tmp_path: Path) -> None:
    """A distribution registering `ghost = no_such_pkg.env:Ghost` is listed as broken, not as a plugin."""
    site = tmp_path / "site"
    info = site / "ghost_env-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ghost-env\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[framework.envs]\nghost = no_such_pkg.env:Ghost\n")
    r = cli("plugins", "--kind", "env", env={"PYTHONPATH": str(site), "COLUMNS": "200"})
    assert r.returncode == 0, r.output
    ghost = next(row for row in r.stdout.splitlines() if row.split()[:2] == ["env", "ghost"])
    assert "(broken: its module no_such_pkg.env is not installed)" in ghost, ghost


def test_plugins_config_shows_each_key_with_its_default_and_description(cli) -> None:
    r = cli("plugins", "--config", "dqn")
    assert r.returncode == 0, r.output
    assert r.stdout.startswith("agent plugin 'dqn', selected by agent=dqn")
    batch = next(line for line in r.stdout.splitlines() if "agent.batch_size" in line)
    assert batch.split()[:2] == ["agent.batch_size", "32"] and "Transitions per gradient step." in batch
    fighter = cli("plugins", "--config", "fighter")  # a description over several lines, whole
    assert "launches a headless Chromium." in _row("env.headless", fighter.stdout)
    unknown = cli("plugins", "--config", "dqm")
    assert unknown.returncode == 1 and "no plugin or config named 'dqm'" in unknown.stderr
    nested = cli("plugins", "--config", "sequential")  # a section within a section, by its dotted key
    assert nested.returncode == 0, nested.output
    backend = _row("search.inference.backend", nested.stdout)
    assert backend.split()[:2] == ["search.inference.backend", "auto"] and "onnxruntime" in backend
    sweeper = cli("plugins", "--config", "optuna")  # a sweeper plugin: its keys under hydra.sweeper
    assert sweeper.stdout.startswith("sweeper plugin 'optuna', selected by hydra/sweeper=optuna")
    assert _row("hydra.sweeper.pruner", sweeper.stdout).split()[:2] == ["hydra.sweeper.pruner", "median"]
    service = cli("plugins", "--config", "ray")  # a service plugin: its keys in the root section
    assert service.stdout.startswith("service plugin 'ray'"), service.output
    assert _row("ray.init_timeout_s", service.stdout).split()[:2] == ["ray.init_timeout_s", "120.0"]


def _row(key: str, listing: str) -> str:
    """The row of `key` in `plugins --config`: its line and those its description goes on to, as one."""
    lines = listing.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [key])
    more = itertools.takewhile(lambda line: line.startswith("   "), lines[start + 1 :])
    return " ".join(" ".join([lines[start], *more]).split())


def test_plugins_config_shows_the_cores_own_keys(cli) -> None:
    """`plugins --config eval` was "no plugin or config named 'eval'": what eval.every_steps=0 means was
    in the source alone."""
    run = cli("plugins", "--config", "run")
    assert run.returncode == 0, run.output
    rows = {
        line.split()[0]: line for line in run.stdout.splitlines() if line.startswith("  ") and line.split()
    }
    assert {"seed", "total_steps", "device", "threads", "resume", "progress", "log_every_s"} <= set(rows), (
        rows
    )
    assert not {"env", "agent", "eval", "eval.episodes"} & set(rows), rows
    assert "Training budget in environment steps" in rows["total_steps"]
    section = cli("plugins", "--config", "eval")
    said = " ".join(section.stdout.split())
    assert section.returncode == 0 and said.startswith("the eval section of every run's config"), said
    assert "eval.every_steps 10000 Evaluate every N env steps during training (0: only at the end)." in said


def test_plugins_config_of_a_preset_shows_what_it_sets(cli) -> None:
    """`--help` offers `plugins --config CHOICE` for every GROUP=CHOICE: the presets' too."""
    r = cli("plugins", "--config", "dqn_cartpole")
    assert r.returncode == 0, r.output
    lines = r.stdout.splitlines()
    # The heading wraps where the checkout's path makes it long: compare it as one line.
    heading = " ".join(r.stdout.split()).partition(" the whole config it gives")[0]
    assert heading.startswith("tuned=dqn_cartpole: a preset (") and "conf/tuned/dqn_cartpole.yaml)" in heading
    # Taken with its agent and env: the command that shows it composes them, not tuned= alone.
    assert "python -m framework --cfg job agent=dqn env=cartpole`" in " ".join(r.stdout.split())
    assert "  agent.n_step                  3" in lines and "  total_steps                   50000" in lines
    assert "  agent.double_q                false" in lines
    r = cli("plugins", "--config", "gomoku_9x9")
    assert r.returncode == 0, r.output
    assert " ".join(r.stdout.split()).startswith("experiment=gomoku_9x9: a preset ("), r.output
    # A plugin names the presets that set more of its keys.
    r = cli("plugins", "--config", "dqn")
    assert "tuned=dqn_atari|dqn_cartpole|dqn_lunarlander sets more of its keys" in " ".join(r.stdout.split())


def test_help_lists_config_groups(cli) -> None:
    r = cli("--help")
    assert r.returncode == 0
    assert "env: atari, cartpole, fighter, gomoku, gym, lunarlander" in r.stdout
    # dqn is our own DQN (plugins/dqn); sb3_dqn is Stable-Baselines3's.
    assert "agent: a2c, alphazero, dqn, ppo, qrdqn, sac, sb3, sb3_dqn, td3, tqc, trpo" in r.stdout
    assert "search: ray_async, sequential" in r.stdout
    assert "experiment: gomoku_15x15, gomoku_6x6, gomoku_9x9" in r.stdout
    assert 'agent=qrdqn, tqc and trpo need sb3-contrib: pip install "framework[contrib]"' in r.stdout


def test_cfg_job_shows_tuned_hyperparameters_for_the_chosen_pair(cli) -> None:
    r = cli("--cfg", "job", "env=cartpole", "agent=ppo")
    assert r.returncode == 0, r.output
    assert "n_steps: 32" in r.stdout and "learning_rate: lin_0.001" in r.stdout
    other = cli("--cfg", "job", "env=lunarlander", "agent=ppo")
    assert "n_steps: 1024" in other.stdout
    assert "total_steps: 1000000" in other.stdout  # a preset's budget wins over the root default
    overridden = cli("--cfg", "job", "env=lunarlander", "agent=ppo", "total_steps=5")
    assert "total_steps: 5" in overridden.stdout  # and the command line wins over the preset


def test_misspelled_override_key_fails_naming_the_key_and_the_closest_one(cli) -> None:
    r = cli("env.n_env=2", "tracking=none")
    assert r.returncode == 1
    assert "Unknown config key env.n_env. Did you mean env.n_envs?" in r.stderr
    assert "Traceback" not in r.output


def test_added_key_unknown_to_the_plugin_schema_fails_with_a_suggestion(cli) -> None:
    r = cli("+env.n_env=2", "tracking=none")
    assert r.returncode == 1
    assert "Unknown config key env.n_env for env plugin 'cartpole'. Did you mean env.n_envs?" in r.stderr


def test_wrong_type_at_root_fails_naming_the_key(cli) -> None:
    r = cli("total_steps=lots")
    assert r.returncode == 1
    assert "total_steps=lots must be an integer" in r.stderr


def test_wrong_type_in_plugin_section_fails_naming_the_key(cli, tmp_path: Path) -> None:
    r = cli("env.n_envs=two")
    assert r.returncode == 1
    assert "env.n_envs=two must be an integer" in r.stderr
    assert not (tmp_path / "mlflow.db").exists(), "nothing may start before the config is valid"


def test_unknown_plugin_name_lists_the_known_ones(cli) -> None:
    r = cli("env.name=cartpol", "tracking=none")
    assert r.returncode == 1
    assert "Unknown env plugin 'cartpol'. Did you mean 'cartpole'?" in r.stderr


def test_unknown_config_group_option_lists_the_available_ones(cli) -> None:
    r = cli("env=cartpol")
    assert r.returncode == 1
    assert "cartpol" in r.stderr and "cartpole" in r.stderr


def test_an_optional_groups_option_that_does_not_exist_is_refused_not_left_out(cli, tmp_path: Path) -> None:
    """`tuned` is an optional default (the agent-env pairs that have tuned settings): a mistyped
    option was left out silently, the run going on with the schema's defaults."""
    r = cli("tuned=dqn_cartpol")
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    assert r.stderr.startswith(
        "Error: tuned=dqn_cartpol is not a config of group tuned. Did you mean tuned=dqn_cartpole? Options: "
    ), r.stderr
    assert not (tmp_path / "outputs").exists()
    for group in ("env", "tuned"):
        r = cli(f"{group}=null")
        assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
        assert r.stderr.strip().splitlines()[0] == (
            f"Error: {group}=null: a config group takes one of its options (python -m framework --help "
            "lists the groups); ~GROUP leaves out an optional one (~tuned)"
        )


def test_a_sweeps_config_asked_for_is_one_jobs_or_one_message(cli) -> None:
    """`seeds=3 --cfg job` shows the first seed's job (it was Hydra's traceback: a sweep with --cfg)."""
    r = cli("seeds=3", "seed=5", "--cfg", "job")
    assert r.returncode == 0 and "\nseed: 5\n" in r.stdout, r.output[-3000:]
    r = cli("-m", "seed=1,2", "--cfg", "job")
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    assert r.stderr.startswith("Error: -m (--multirun) with --cfg, --info or --shell-completion: those"), (
        r.stderr
    )


def test_runs_from_any_directory(cli, tmp_path: Path) -> None:
    from tests.conftest import FAST

    r = cli(*FAST, "tracking=none", "progress=log")
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 1024" in r.output
    assert "steps/s" in r.output  # plain progress lines when not on a terminal
    assert list(tmp_path.glob("outputs/*/*/checkpoints/step_*"))


def test_tab_completion_of_the_framework_command_offers_group_options(tmp_path: Path) -> None:
    env = {**__import__("os").environ, "COMP_LINE": "framework env=c", "COMP_POINT": "15"}
    p = subprocess.run(
        [sys.executable, "-m", "framework", "-sc", "query=bash"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert p.stdout.split() == ["env=cartpole"], p.stderr[-2000:]


def test_the_last_lines_say_how_the_run_ended_and_where_its_results_are(cli, tmp_path: Path) -> None:
    from tests.conftest import FAST

    r = cli(*FAST, "progress=log")
    assert r.returncode == 0, r.output[-3000:]
    tail = r.stdout.strip().splitlines()[-6:]
    assert tail[0] == "Run FINISHED at step 1024 of 1024."
    assert tail[1].split()[0] == "eval/return_mean"
    run_dir = next(tmp_path.glob("outputs/*/*"))
    run_id = tail[2].split()[-1].strip("()")
    assert tail[2].split()[0] == "run" and len(run_id) == 32
    assert tail[3].split() == ["run", "dir", str(run_dir)]
    # The command that opens the run (the store is ./mlflow.db: no tracking.uri), then its address.
    assert tail[4].split() == ["view", "it", "python", "-m", "framework", "ui", "--run", run_id]
    # Where `ui` would serve the store: 5000, or its own port where a test beside it holds 5000.
    from framework_plugins.trackers.local_views import own_port

    own = own_port(f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}")
    assert tail[5].split()[0] in [
        f"http://127.0.0.1:{port}/#/experiments/1/runs/{run_id}?workflowType=machine_learning"
        for port in (5000, own)
    ], tail
    assert all(len(line) <= 100 for line in tail if not line.lstrip().startswith(("run dir", "http://"))), (
        tail
    )
    # The same lines end the run's log file.
    assert "\n".join(tail) in (run_dir / "framework.log").read_text()


def test_a_run_whose_reader_goes_runs_to_its_end_finished(tmp_path: Path) -> None:
    """`python -m framework ... | head -1`: its output has nowhere to go after the first line, and the
    run goes on and ends FINISHED, exit status 0, no "Logging error" nor BrokenPipeError."""
    import subprocess

    from mlflow.tracking import MlflowClient

    from tests.conftest import FAST, start_cli

    p = start_cli(*FAST, "progress=log", "log_every_s=0", cwd=tmp_path, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.readline()  # what `head -1` reads, before it goes
    p.stdout.close()
    errors = p.stderr.read()
    assert p.wait(timeout=300) == 0, errors[-3000:]
    assert "Logging error" not in errors and "BrokenPipe" not in errors, errors[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    assert run.info.status == "FINISHED" and run.data.metrics["eval/return_mean"] > 0


def test_why_a_run_failed_is_in_its_log_as_on_the_terminal(cli, tmp_path: Path) -> None:
    """The log holds every line the run printed: its error's too, not only its last lines."""
    r = cli("env=gym", "env.id=Blackjack-v1", "agent=ppo", "total_steps=300")  # refused as SB3 builds
    assert r.returncode == 1, r.output[-3000:]
    said = "Error: agent.algo=PPO cannot learn on this env's observations, Tuple(Discrete(32),"
    assert said in r.stderr
    (log,) = tmp_path.glob("outputs/*/*/framework.log")
    text = log.read_text()
    assert said in " ".join(text.split()) and "Run FAILED at step 0 of 300." in text


def test_progress_never_counts_past_the_budget_and_the_end_says_why(cli) -> None:
    r = cli(
        "agent=ppo", "env.n_envs=1", "agent.hyperparams.n_steps=128", "agent.hyperparams.batch_size=64",
        "total_steps=300", "eval.episodes=1", "tracking=none", "progress=log", "log_every_s=0",
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    shown = [int(m) for m in re.findall(r"step (\d+)/300", r.output)]
    assert shown and max(shown) == 300
    assert (
        "Run FINISHED at step 384 of 300 (its last rollout or update cycle ran past the budget)." in r.stdout
    )
