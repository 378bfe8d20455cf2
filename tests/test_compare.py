"""Seeds as a dimension: `seeds=N` on the command line, and `python -m framework compare` over runs
of several sweeps and single runs, grouped into configurations by the settings that differ."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from framework.contracts.tracker import SUMMARY_SPEC_TAG
from framework.errors import ConfigError
from framework_plugins.sweeps import seeds
from plugins.trackers import local_views, ui
from tests.conftest import FAST, free_port

OBJECTIVE = "eval/return_mean"


@pytest.mark.parametrize(
    ("argv", "expanded"),
    [
        (["seeds=5"], ["-m", "seed=range(0,5)"]),
        (["agent=ppo", "seed=10", "seeds=3"], ["-m", "agent=ppo", "seed=range(10,13)"]),
        (["-m", "agent.gamma=0.9,0.99", "seeds=2"], ["-m", "agent.gamma=0.9,0.99", "seed=range(0,2)"]),
        (["seeds=1", "seed=4"], ["seed=4"]),
        # What Hydra shows of one job (--cfg, --info): the first seed's.
        (["seeds=3", "seed=5", "--cfg", "job"], ["seed=5", "--cfg", "job"]),
        (["seeds=2", "--info"], ["seed=0", "--info"]),
        (["agent=ppo"], ["agent=ppo"]),
    ],
)
def test_seeds_is_a_sweep_over_the_seed(argv: list[str], expanded: list[str]) -> None:
    assert seeds.expand(argv) == expanded


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["seeds=0"],
            "seeds=0: the number of seeds each configuration runs over, a whole number from 1 to 1000",
        ),
        (["seeds=five"], "seeds=five: the number of seeds"),
        (["seeds=2", "seeds=3"], "give seeds= once"),
        (["-m", "seed=1,2", "seeds=3"], "seed=1,2 with seeds=3: seeds= sweeps the seed itself"),
        (["seeds=2", "seed=-1"], "seed=-1 with seeds=2: a seed is a whole number from 0 to 4294967295"),
        (
            ["-m", "hydra/sweeper=optuna", "seeds=3"],
            "seeds=3 with hydra/sweeper=optuna: a study's trial is one run",
        ),
    ],
)
def test_a_wrong_seeds_is_refused_in_one_line(argv: list[str], said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)):
        seeds.expand(argv)


def _store(tmp_path: Path) -> tuple[str, MlflowClient, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    return uri, client, client.create_experiment("framework")


def _run(
    client: MlflowClient, experiment: str, params: dict[str, str], curve: list[float], parent: str = ""
) -> str:
    tags = {"mlflow.parentRunId": parent} if parent else {}
    run = client.create_run(experiment, run_name=" ".join(f"{k}={v}" for k, v in params.items()), tags=tags)
    run_id = run.info.run_id
    for key, value in {**params, "objective.metric": OBJECTIVE, "objective.mode": "max"}.items():
        client.log_param(run_id, key, value)
    for step, value in enumerate(curve):
        client.log_metric(run_id, OBJECTIVE, value, step=100 * step)
    client.set_terminated(run_id, "FINISHED")
    return run_id


def test_compare_folds_the_seeds_of_two_sweeps_and_a_single_run(tmp_path: Path, cli) -> None:
    """Two sweeps' parents (lr 0.1 and 0.01, three seeds each) and a single run of a third setting:
    three configurations, each seed's last value folded into an IQM; the page links every run."""
    uri, client, experiment = _store(tmp_path)
    parents = []
    for lr, base in (("0.1", 100.0), ("0.01", 10.0)):
        parent = client.create_run(experiment, run_name=f"sweep lr={lr}").info.run_id
        client.set_terminated(parent, "FINISHED")
        parents.append(parent)
        for seed in range(3):
            params = {"agent.name": "dqn", "agent.lr": lr, "seed": str(seed), "tracking.run_name": f"x{seed}"}
            _run(client, experiment, params, [0.0, base / 2, base + seed], parent)
    single = _run(client, experiment, {"agent.name": "dqn", "agent.lr": "0.5", "seed": "0"}, [1.0, 2.0])
    out = tmp_path / "cmp"
    # None written yet: the command that writes one, for the store and the run's own experiment.
    assert ui._compared(uri, "framework") == f"python -m framework compare framework tracking.uri={uri}"
    assert ui._compared(uri, "another", single) == f"python -m framework compare framework tracking.uri={uri}"
    r = cli("compare", *parents, single, f"tracking.uri={uri}", "--out", str(out))
    assert r.returncode == 0, r.output
    assert "Compared 7 runs (7 FINISHED) in 3 configurations on eval/return_mean (max)." in r.stdout
    # The single run has no spread over seeds, so no interval: it stands out of the verdict.
    said = " ".join(r.stdout.split())
    assert (
        "Best: lr=0.1, its IQM's 95 % interval apart from every other's (3 seeds each; fewer than 5 "
        "give rough intervals); lr=0.5 has a "
        "single run, so no interval, and is left out of the comparison." in said
    )
    assert all(len(line) <= 100 for line in r.stdout.splitlines() if "/" not in line.split()[-1])
    rows = list(csv.DictReader((out / "compare.csv").open(encoding="utf-8")))
    configs = {row["run"]: row for row in rows if row["row"] == "configuration"}
    # Only the lr differs (the seed and the bookkeeping never set configurations apart).
    assert set(configs) == {"lr=0.1", "lr=0.01", "lr=0.5"}
    assert (configs["lr=0.1"]["n"], configs["lr=0.1"]["iqm"], configs["lr=0.1"]["best"]) == (
        "3",
        "101",
        "yes",
    )
    assert configs["lr=0.5"]["n"] == "1" and configs["lr=0.5"]["iqm"] == "2"
    assert configs["lr=0.5"]["iqm_low"] == configs["lr=0.5"]["iqm_high"] == ""  # one run: no interval
    # The median of the seeds (not rliable's median of task means, which is the mean here)
    assert (configs["lr=0.01"]["mean"], configs["lr=0.01"]["median"]) == ("11", "11")
    chance = [configs["lr=0.01"][k] for k in ("p_improve", "p_improve_low", "p_improve_high")]
    assert chance == ["0", "0", "0"]  # every run of lr=0.01 loses to every run of lr=0.1
    page = (out / "compare.html").read_text(encoding="utf-8")
    assert page.count("data-run='#/experiments/") == 2 * 7  # each run in its configuration and the runs table
    assert {p.name for p in out.iterdir()} >= {
        "seeds_curves.png",
        "seeds_profile.png",
        "seeds_improvement.png",
    }
    written = (out / "compare.html").resolve()
    assert local_views.latest_page(uri, "framework") == (written, [*parents, single])
    assert ui._compared(uri, "framework") == written.as_uri()  # what `ui` names
    # A run that ends after the page was written is not in it: `ui` says so, and how to write it anew
    # (a sweep's parent, which trains nothing, is not counted).
    after = int(written.stat().st_mtime * 1000) + 1000
    later = client.create_run(experiment, run_name="later").info.run_id
    client.set_terminated(later, "FINISHED", end_time=after)
    sweep = client.create_run(experiment, run_name="sweep", tags={SUMMARY_SPEC_TAG: "{}"}).info.run_id
    client.set_terminated(sweep, "FINISHED", end_time=after)
    again = f"python -m framework compare {' '.join([*parents, single])} tracking.uri={uri}"
    assert ui._compared(uri, "framework").splitlines() == [
        written.as_uri(),
        f"(1 run ended after it was written: {again} writes it anew)",
    ]


def test_a_seed_run_again_with_the_same_settings_counts_once_by_its_latest_run(tmp_path: Path, cli) -> None:
    """A single run of seed 0, then a sweep over seeds 0-2 of the same settings: three seeds, not
    four (seed 0 twice would narrow the interval with a copy); the earlier run shown, greyed, and a
    killed run counted in the headline as what it is."""
    uri, client, experiment = _store(tmp_path)
    first = _run(client, experiment, {"agent.name": "dqn", "seed": "0"}, [50.0])
    parent = client.create_run(experiment, run_name="sweep").info.run_id
    for seed, score in ((0, 40.0), (1, 20.0), (2, 30.0)):
        _run(client, experiment, {"agent.name": "dqn", "seed": str(seed)}, [score], parent)
    killed = _run(client, experiment, {"agent.name": "dqn", "seed": "3"}, [90.0])
    client.set_terminated(killed, "KILLED")
    out = tmp_path / "cmp"
    r = cli("compare", first, parent, killed, f"tracking.uri={uri}", "--out", str(out))
    assert r.returncode == 0, r.output
    said = " ".join(r.stdout.split())
    assert "Compared 5 runs (3 FINISHED, 1 KILLED, 1 REPEATED) in 1 configuration" in said, r.stdout
    assert "3 seeds: IQM of eval/return_mean 30," in said  # 40, 20, 30: not 50 nor 90
    assert (
        "1 run was run again later with the same settings and seed (agent.name=dqn seed=0): each seed "
        "counts once, by its latest run." in said
    )
    rows = list(csv.DictReader((out / "compare.csv").open(encoding="utf-8")))
    (config,) = [row for row in rows if row["row"] == "configuration"]
    assert (config["n"], config["iqm"]) == ("3", "30")
    status = {row["run_id"]: row["status"] for row in rows if row["row"] == "run"}
    assert (status[first], status[killed]) == ("REPEATED", "KILLED")
    assert list(status.values()).count("FINISHED") == 3
    page = (out / "compare.html").read_text(encoding="utf-8")
    assert (
        "Runs that did not finish, or that a later run repeats (its settings, its seed), are greyed" in page
    )


def test_a_resumed_run_is_compared_at_the_budget_it_was_resumed_to(tmp_path: Path, cli) -> None:
    """Its total_steps param is its first start's (params cannot change): a run resumed from 1,000 to
    2,000 steps was compared as a run of 1,000 beside one of 2,000 that it matches."""
    uri, client, experiment = _store(tmp_path)
    resumed = _run(client, experiment, {"agent.name": "dqn", "total_steps": "1000", "seed": "0"}, [50.0])
    client.set_tag(resumed, "framework.total_steps", "2000")
    whole = _run(client, experiment, {"agent.name": "dqn", "total_steps": "2000", "seed": "1"}, [40.0])
    short = _run(client, experiment, {"agent.name": "dqn", "total_steps": "1000", "seed": "2"}, [10.0])
    out = tmp_path / "cmp"
    r = cli("compare", resumed, whole, short, f"tracking.uri={uri}", "--out", str(out))
    assert r.returncode == 0, r.output
    rows = list(csv.DictReader((out / "compare.csv").open(encoding="utf-8")))
    budget = {row["run_id"]: row["total_steps"] for row in rows if row["row"] == "run"}
    assert budget == {resumed: "2000", whole: "2000", short: "1000"}, rows
    assert [row["n"] for row in rows if row["row"] == "configuration"] == ["2", "1"]


def test_runs_of_several_envs_are_compared_one_env_at_a_time(tmp_path: Path, cli) -> None:
    """CartPole's and Acrobot's returns were ranked in one table, each against the other's leader."""
    uri, client, experiment = _store(tmp_path)
    for seed in range(2):
        _run(
            client,
            experiment,
            {"env.name": "cartpole", "agent.name": "dqn", "seed": str(seed)},
            [100.0 + seed],
        )
        acrobot = {"env.name": "gym", "env.id": "Acrobot-v1", "agent.name": "dqn", "seed": str(seed)}
        _run(client, experiment, acrobot, [-90.0 - seed])
    mixed = cli("compare", f"tracking.uri={uri}", "--out", str(tmp_path / "cmp"))
    assert mixed.returncode == 1 and not (tmp_path / "cmp").exists(), mixed.output
    assert " ".join(mixed.stderr.split()) == (
        "Error: the runs are of 2 envs: cartpole (2 runs), gym:Acrobot-v1 (2 runs); a metric is compared "
        "within one env: say which with --env cartpole, or name the runs to compare"
    )
    one = cli("compare", "--env", "gym:Acrobot-v1", f"tracking.uri={uri}", "--out", str(tmp_path / "cmp"))
    assert one.returncode == 0 and "Compared 2 runs (2 FINISHED) in 1 configuration" in one.stdout, one.output
    by_id = cli("compare", "--env", "Acrobot-v1", f"tracking.uri={uri}", "--out", str(tmp_path / "cmp2"))
    assert by_id.returncode == 0, by_id.output
    for seed in range(2):
        pong = {"env.name": "atari", "env.game": "Pong", "agent.name": "dqn", "seed": str(seed)}
        _run(client, experiment, pong, [-21.0])
        _run(client, experiment, {**pong, "env.game": "Breakout"}, [1.0])
    games = cli("compare", "--env", "atari", f"tracking.uri={uri}")
    assert games.returncode == 1, games.output
    assert "--env atari: its runs are of 2 tasks, atari:Breakout, atari:Pong: say which" in games.stderr
    pong = cli("compare", "--env", "pong", f"tracking.uri={uri}", "--out", str(tmp_path / "cmp3"))
    assert pong.returncode == 0 and "Compared 2 runs" in pong.stdout, pong.output
    none = cli("compare", "--env", "nope", f"tracking.uri={uri}")
    said = " ".join(none.stderr.split())
    assert (
        none.returncode == 1 and "--env nope: none of the runs is of it; they are of atari:Breakout" in said
    )


def test_compare_says_what_it_cannot_compare(tmp_path: Path, cli) -> None:
    uri, client, experiment = _store(tmp_path)
    _run(client, experiment, {"agent.lr": "0.1", "seed": "0"}, [1.0])
    r = cli("compare", "framwork", f"tracking.uri={uri}")
    assert r.returncode == 1 and r.stderr.strip() == (
        "Error: framwork: neither a run id nor an experiment (did you mean framework?); experiments: "
        "Default, framework"
    )
    r = cli("compare", "--metric", "eval/return_men", f"tracking.uri={uri}")
    assert (
        r.returncode == 1
        and "--metric eval/return_men: no run logged it (did you mean eval/return_mean?)" in r.stderr
    )
    assert "Traceback" not in r.output
    client.log_metric(client.search_runs([experiment])[0].info.run_id, "train/loss", 0.5)
    r = cli("compare", "--metric", "train/loss", f"tracking.uri={uri}")  # not the objective: which way?
    said = " ".join(r.stderr.split())
    assert r.returncode == 1 and "--metric train/loss is not the runs' objective (objective.metric)" in said
    killed = _run(client, experiment, {"agent.lr": "0.2", "seed": "0"}, [2.0])
    client.set_terminated(killed, "KILLED")  # stopped, with a value: named with its status and the resume
    r = cli("compare", killed, f"tracking.uri={uri}")
    assert r.returncode == 1 and " ".join(r.stderr.split()) == (
        f"Error: run {killed} (agent.lr=0.2 seed=0) ended KILLED: compare counts FINISHED runs; finish it "
        f"with python -m framework resume={killed}"
    ), r.stderr
    r = cli("compare", "tracking=none")  # a store's override, not a run's name
    assert r.returncode == 1 and r.stderr.strip() == (
        "Error: tracking is off in this config (tracking=none): give tracking=mlflow"
    ), r.stderr


def test_compare_and_ui_refuse_at_once_a_tracking_server_that_does_not_answer(cli) -> None:
    """Not after MLflow's own retries (7, backing off: four minutes), nor with a traceback."""
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for command in (["compare"], ["ui", "--no-browser"]):
        r = cli(*command, f"tracking.uri={uri}", timeout=120)
        assert r.returncode == 1 and "Traceback" not in r.output, r.output
        assert " ".join(r.stderr.split()).startswith(
            f"Error: The MLflow tracking server tracking.uri={uri} does not answer ("
        ), r.stderr


@pytest.mark.slow
def test_seeds_runs_each_configuration_over_its_seeds(cli, tmp_path: Path) -> None:
    """`python -m framework seeds=3`: a sweep over seed 0..2 whose parent holds the IQM of the
    objective over the seeds, its interval, and the plots over seeds."""
    r = cli(*FAST, "seeds=3", timeout=600)
    assert r.returncode == 0, r.output[-3000:]
    assert "Sweep FINISHED: 3 runs (3 FINISHED)." in r.stdout
    assert "\n  over seeds        3 seeds: IQM of eval/return_mean " in r.stdout  # not just the luckiest
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    (parent,) = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    assert sorted(run.data.params["seed"] for run in runs if run is not parent) == ["0", "1", "2"]
    last = sorted(run.data.metrics[OBJECTIVE] for run in runs if run is not parent)
    metrics = parent.data.metrics
    assert metrics[f"iqm_low/{OBJECTIVE}"] <= metrics[f"iqm/{OBJECTIVE}"] <= metrics[f"iqm_high/{OBJECTIVE}"]
    assert metrics[f"iqm/{OBJECTIVE}"] == pytest.approx(sum(last) / 3)  # a quarter of 3 runs is none
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"seeds_curves.png", "seeds_profile.png", "sweep_summary.html"} <= artifacts
    spec = json.loads(parent.data.tags["framework.summary_spec"])
    assert spec["swept_keys"] == ["seed"]


def test_a_label_names_what_sets_a_configuration_apart_from_its_own_kind(tmp_path: Path, cli) -> None:
    """Our DQN beside SB3's PPO at two n_epochs: the settings only DQN runs have name nothing (its
    plugin says it), gamma is the same for both PPOs; the PPOs' labels name their n_epochs."""
    uri, client, experiment = _store(tmp_path)
    for seed in range(2):
        dqn = {"agent.name": "dqn", "agent.activation": "relu", "agent.batch_size": "64"}
        _run(client, experiment, {**dqn, "seed": str(seed)}, [1.0, 5.0 + seed])
        for epochs in ("5", "10"):
            ppo = {"agent.name": "sb3", "agent.algo": "PPO", "agent.hyperparams.n_epochs": epochs}
            ppo |= {"agent.hyperparams.gamma": "0.99", "seed": str(seed)}
            _run(client, experiment, ppo, [2.0 + seed + int(epochs)])  # one evaluation each
    out = tmp_path / "cmp"
    r = cli("compare", f"tracking.uri={uri}", "--out", str(out))
    assert r.returncode == 0, r.output
    rows = list(csv.DictReader((out / "compare.csv").open(encoding="utf-8")))
    labels = [row["run"] for row in rows if row["row"] == "configuration"]
    assert labels == ["name=sb3 algo=PPO n_epochs=10", "name=sb3 algo=PPO n_epochs=5", "name=dqn"], labels
    # Past two settings the objective is not drawn across one of them: the plots over seeds show it.
    assert not (out / "objective.png").exists() and (out / "seeds_curves.png").is_file()


def test_a_swept_config_group_sets_configurations_apart_by_the_option_each_run_chose(tmp_path: Path) -> None:
    """`-m agent=ppo,a2c seeds=2`: no param holds `agent`; each run's command line says which option
    it ran, so the sweep's summary folds two configurations of two seeds, not four seeds of one."""
    from plugins.trackers import seed_summary
    from plugins.trackers.sweep_child import child_from_run

    _, client, experiment = _store(tmp_path)
    for agent, scores in (("ppo", (10.0, 20.0)), ("a2c", (100.0, 200.0))):
        for seed, score in enumerate(scores):
            run_id = _run(client, experiment, {"agent.name": "sb3", "seed": str(seed)}, [score])
            client.set_tag(run_id, "framework.overrides", f"-m agent={agent} seed={seed} total_steps=2000")
    runs = client.search_runs([experiment])
    children = [child_from_run(run, ["agent", "seed"], OBJECTIVE) for run in runs]
    assert sorted((c.params["agent"], c.params["seed"]) for c in children) == [
        ("a2c", "0"), ("a2c", "1"), ("ppo", "0"), ("ppo", "1"),
    ]  # fmt: skip
    configs = seed_summary.configurations(children, ["agent", "seed"], "max")
    assert [(c.label, c.n) for c in configs] == [("agent=a2c", 2), ("agent=ppo", 2)]


def test_a_run_is_found_by_the_eight_characters_pages_show_of_its_id(tmp_path: Path, cli) -> None:
    uri, client, experiment = _store(tmp_path)
    run_id = _run(client, experiment, {"agent.lr": "0.1", "seed": "0"}, [3.0])
    r = cli("compare", run_id[:8], f"tracking.uri={uri}", "--out", str(tmp_path / "cmp"))
    assert r.returncode == 0, r.output
    assert "Compared 1 run (1 FINISHED) in 1 configuration on eval/return_mean (max)." in r.stdout
    short = cli("compare", run_id[:7], f"tracking.uri={uri}")
    assert short.returncode == 1, short.output
    assert "(the start of a run id is 8 characters or more, as pages show it)" in " ".join(
        short.stderr.split()
    )
    typo = run_id[:-1] + ("0" if run_id[-1] != "0" else "1")  # a character off
    wrong = cli("compare", typo, f"tracking.uri={uri}")
    said = " ".join(wrong.stderr.split())
    store = tmp_path / "mlflow.db"
    assert wrong.returncode == 1 and f"no run {typo} in the tracking store {store} (did " in said
    assert f"(did you mean {run_id}?). A run tracked in another store is compared with tracking.uri=" in said
