"""Run names a person can tell apart: the plugin and the overrides in a run's name, a sweep's child
led by its own values, short enough for MLflow's Run Name column, a config hash where a name leaves a
difference out; and, in a real MLflow UI in Chromium, what the column shows of them."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import pytest
from omegaconf import DictConfig

from framework.app import compose
from framework_plugins.sweeps.names import (
    CHILD_NAME_PX,
    CHILD_VALUES_PX,
    SweepStyle,
    child_name,
    child_run_name,
    parent_run_name,
    sweep_style,
)
from framework_plugins.trackers.run_names import (
    MOST_CHARS,
    NAME_PX,
    labels,
    run_name,
    short_value,
    text_width,
)

LR, EPOCHS = "agent.hyperparams.learning_rate", "agent.hyperparams.n_epochs"


@functools.cache
def _config(*overrides: str) -> DictConfig:
    return compose(list(overrides))


def _name(*overrides: str) -> str:
    cfg = _config(*overrides)
    return run_name(cfg, str(cfg.env.name), overrides)


def _child(job: list[str], swept: list[str]) -> str:
    """A grid sweep's job, named as the sweeps plugin names it: its own values, then the rest."""
    cfg = _config(*job)
    own = child_run_name(job, swept)
    assert own is not None
    return child_name(own, cfg, str(cfg.env.name), job, swept)


def _shown(name: str, px: float) -> str:
    """What a column `px` wide shows of `name`: as much as fits, then `…`."""
    if text_width(name) <= px:
        return name
    cut = name
    while cut and text_width(cut + "…") > px:
        cut = cut[:-1]
    return cut + "…"


def test_our_dqn_and_sb3s_dqn_are_named_for_their_plugins() -> None:
    assert _name("agent=dqn") == "dqn-s0 cartpole"
    assert _name("agent=sb3_dqn") == "sb3-dqn-s0 cartpole"
    assert _name("agent=ppo", "seed=3") == "sb3-ppo-s3 cartpole"
    # Both fit the Run Name column of a run of its own, at 1400 px.
    assert all(text_width(_name(agent)) <= NAME_PX for agent in ("agent=dqn", "agent=sb3_dqn", "agent=ppo"))


def test_differently_configured_runs_are_named_for_the_overrides_that_change_what_they_train() -> None:
    names = {
        _name("agent=ppo", "agent.hyperparams.n_epochs=5"),
        _name("agent=ppo", "agent.hyperparams.n_epochs=10", "env.n_envs=4"),
        _name("agent=ppo", f"{LR}=0.0003"),
    }
    assert names == {
        "sb3-ppo-s0 epochs=5 cartpole",
        "sb3-ppo-s0 epochs=10 envs=4 cartpole",
        "sb3-ppo-s0 lr=3e-4 cartpole",
    }
    # How a run is tracked, shown, checkpointed or evaluated is not part of what it trains.
    operational = ("progress=log", "eval.episodes=3", "checkpoint.every_steps=64", "device=cpu")
    assert _name("agent=ppo", *operational) == "sb3-ppo-s0 cartpole"
    # The same config, written another way, gets the same name.
    assert _name("agent=ppo", f"{LR}=3e-4") == _name("agent=ppo", f"{LR}=0.0003")
    assert _name("total_steps=100000") == "dqn-s0 steps=100k cartpole"
    # An interpolation is named by what it resolved to, not as written.
    assert _name("env.n_envs=${oc.env:NO_SUCH_VARIABLE_HERE,2}") == "dqn-s0 envs=2 cartpole"
    # How long a run trains comes after what it trains; the agent and seed before both.
    assert _name("agent=ppo", "total_steps=2000", "env.n_envs=4") == "sb3-ppo-s0 envs=4 steps=2k cartpole"
    budget = [_name("agent=sb3_dqn", "total_steps=2000"), _name("agent=ppo", "seed=1", "total_steps=2000")]
    assert len({_shown(name, NAME_PX) for name in budget}) == 2, budget  # apart in MLflow's column


def test_how_a_plugin_shows_or_serves_the_run_is_not_named() -> None:
    """A plugin key marked SHOWN (the fighter's page: whether a browser opens, its port) is no part of
    what the run trains, as the root's tracking and progress keys are not."""
    from framework.config import named_overrides

    overrides = ["env=fighter", "agent=ppo", "env.open_browser=false", "env.port=8080", "env.n_envs=4"]
    cfg = _config(*overrides)
    assert named_overrides(cfg, overrides) == ["env=fighter", "agent=ppo", "env.n_envs=4"]
    assert run_name(cfg, "fighter", named_overrides(cfg, overrides)) == "sb3-ppo-s0 envs=4 fighter"


def test_an_override_that_sets_the_presets_own_value_is_not_named() -> None:
    """rl-zoo3's PPO for CartPole trains 20 epochs on 8 envs: `n_epochs=20` changes nothing."""
    overrides = ("agent=ppo", f"{EPOCHS}=20", "env.n_envs=4")
    cfg, preset = _config(*overrides), _config("agent=ppo")
    assert run_name(cfg, "cartpole", overrides, preset) == "sb3-ppo-s0 envs=4 cartpole"
    assert run_name(cfg, "cartpole", overrides) == "sb3-ppo-s0 epochs=20 envs=4 cartpole"  # no preset
    added = ("agent=ppo", "+agent.hyperparams.target_kl=0.02")  # a key the preset lacks is a change
    assert run_name(_config(*added), "cartpole", added, preset) == "sb3-ppo-s0 target_kl=0.02 cartpole"


def test_a_run_is_named_against_the_preset_its_command_line_composes(cli) -> None:
    r = cli("agent=ppo", f"{EPOCHS}=20", "env.n_envs=4", "total_steps=256", "eval.episodes=1")
    assert r.returncode == 0, r.output[-3000:]
    (line,) = [line for line in r.stdout.splitlines() if line.startswith("  run  ")]
    assert line.split()[1:-1] == ["sb3-ppo-s0", "envs=4", "steps=256", "cartpole"], line


def test_a_value_the_name_rounds_adds_a_hash_of_the_config() -> None:
    exact = _name("agent=ppo", f"{LR}=0.00137")
    rounded = _name("agent=ppo", f"{LR}=0.001368009527972693")
    other = _name("agent=ppo", f"{LR}=0.0013680095")
    assert exact == "sb3-ppo-s0 lr=1.37e-3 cartpole"
    assert rounded.startswith("sb3-ppo-s0 lr=1.37e-3 cartpole cfg:") and len(rounded) == len(exact) + 9
    assert other != rounded and other.rsplit(":", 1)[0] == rounded.rsplit(":", 1)[0]
    # A rerun of the same config, or the same config on another seed, shares its hash.
    assert _name("agent=ppo", f"{LR}=0.001368009527972693") == rounded
    seeded = _name("agent=ppo", f"{LR}=0.001368009527972693", "seed=4")
    assert seeded.endswith(rounded.rsplit(" ", 1)[-1])


def test_a_name_past_its_length_keeps_what_it_leaves_out_in_the_hash() -> None:
    many = [f"agent.hyperparams.{key}={value}" for key, value in (
        ("n_epochs", 3), ("gamma", 0.97), ("gae_lambda", 0.9), ("clip_range", 0.3), ("ent_coef", 0.01),
        ("vf_coef", 0.4), ("max_grad_norm", 0.7), ("batch_size", 32), ("n_steps", 128),
        ("learning_rate", 0.001),
    )]  # fmt: skip
    long = _name("agent=ppo", *many)
    assert len(long) <= MOST_CHARS and " cfg:" in long
    assert _name("agent=ppo", *many[:-1], f"{LR}=0.002") != long


def test_a_sweeps_children_lead_with_their_own_values_and_fit_the_column_under_their_parent() -> None:
    swept = [LR, EPOCHS, "seed"]
    grid = itertools.product(("0.0001", "0.0003", "0.001"), ("5", "10"), ("1", "2"))
    jobs = [["agent=ppo", f"{LR}={lr}", f"{EPOCHS}={ne}", f"seed={seed}"] for lr, ne, seed in grid]
    names = [_child(job, swept) for job in jobs]
    # Two values and a seed are too wide with `=`: numbers follow their labels, as the seed does.
    assert names[0] == "lr1e-4 ne5 s1 sb3-ppo cartpole"
    # What the column shows of each child at 1400 px tells it from its siblings.
    shown = [_shown(name, CHILD_NAME_PX) for name in names]
    assert len(set(shown)) == len(jobs), shown
    assert all(text_width(name.split(" sb3-ppo")[0]) <= CHILD_VALUES_PX for name in names)
    # Two values alone keep their `=`.
    two = _child(["agent=ppo", f"{LR}=0.001", f"{EPOCHS}=5"], [LR, EPOCHS])
    assert two == "lr=1e-3 ne=5 sb3-ppo-s0 cartpole"


def test_a_child_whose_sweep_has_other_overrides_gets_the_hash_of_its_config() -> None:
    job = ["agent=ppo", "total_steps=2048", f"{EPOCHS}=10"]
    named = _child(job, [EPOCHS])
    assert named.startswith("epochs=10 sb3-ppo-s0 cartpole cfg:")
    assert _child(["agent=ppo", "total_steps=4096", f"{EPOCHS}=10"], [EPOCHS]) != named
    assert _child(["agent=ppo", f"{EPOCHS}=10"], [EPOCHS]) == "epochs=10 sb3-ppo-s0 cartpole"


def test_an_optuna_trial_leads_with_its_number() -> None:
    job = [f"{LR}=0.001368009527972693", f"{EPOCHS}=10", "seed=1"]
    assert child_run_name(job, [LR, EPOCHS], trial=7) == "#7 lr1.37e-3 ne10"
    # Its drawn values as narrow as they go (glued): the column under its parent shows the trial's
    # number and its first value whole, up to trial 99 (98 px: two drawn values do not fit whole).
    assert text_width("#99 lr1.37e-3 n…") <= CHILD_NAME_PX
    assert child_run_name(job, []) is None


def test_a_parent_says_what_its_sweep_varies_and_what_every_job_shares() -> None:
    cfg = _config("agent=ppo")
    swept = {LR: "0.0001,0.0003", EPOCHS: "5,10"}
    overrides = ["agent=ppo", f"{LR}=0.0001,0.0003", f"{EPOCHS}=5,10", "env.n_envs=4", "progress=off"]
    assert parent_run_name(cfg, swept, overrides) == "sweep sb3-ppo-s0 lr=1e-4,3e-4 ne=5,10 envs=4 cartpole"
    assert (
        parent_run_name(cfg, {"seed": "range(5)"}, ["seed=range(5)"])
        == "sweep sb3-ppo seed=range(5) cartpole"
    )
    assert (
        parent_run_name(cfg, {LR: "interval(1e-5,1e-2)"}, [], "study")
        == "sweep study: sb3-ppo-s0 lr cartpole"
    )
    # A study the sweeper named by the time goes last: two parents differ in what MLflow shows first.
    timed = [
        parent_run_name(_config(agent), {LR: "interval(1e-5,1e-2)"}, [agent], "study-20261128-055330")
        for agent in ("agent=ppo", "agent=a2c")
    ]
    assert timed[0] == "sweep sb3-ppo-s0 lr cartpole (study-20261128-055330)"
    assert len({_shown(name, NAME_PX) for name in timed}) == 2, timed


def test_labels_are_readable_short_and_unique() -> None:
    keys = [
        "agent.learning_rate",
        "agent.n_epochs",
        "a.max_grad_norm",
        "b.max_gamma_norm",
        "search.batch_size",
    ]
    assert labels(keys) == {
        "agent.learning_rate": "lr",
        "agent.n_epochs": "epochs",
        "a.max_grad_norm": "max_grad",
        "b.max_gamma_norm": "mgn",
        "search.batch_size": "batch",
    }
    # Two keys of one last part keep as many parts as tell them apart.
    assert labels(["agent.gamma", "env.gamma"]) == {"agent.gamma": "agent.gamma", "env.gamma": "env.gamma"}
    # A sweep's labels are made short, the longest first, only as far as its children need.
    assert sweep_style([EPOCHS]).labels == {EPOCHS: "epochs"}
    assert sweep_style([LR, EPOCHS]) == SweepStyle({LR: "lr", EPOCHS: "ne"})
    assert sweep_style([LR, EPOCHS, "seed"]) == SweepStyle(
        {LR: "lr", EPOCHS: "ne", "seed": "seed"}, glued=True
    )
    assert SweepStyle({"env.id": "id"}, glued=True).values({"env.id": "Acrobot-v1"}) == "id=Acrobot-v1"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("0.0003", "3e-4"),
        ("3e-4", "3e-4"),
        ("0.001", "1e-3"),
        ("0.01", "0.01"),
        ("0.99", "0.99"),
        ("2.5e-5", "2.5e-5"),
        ("0.001368009527972693", "1.37e-3"),
        ("1e6", "1e6"),
        ("100000", "100k"),
        ("2000000", "2M"),
        ("1024", "1024"),
        ("1.0", "1"),
        ("[64, 64]", "[64,64]"),
        ("lin_0.001", "lin_0.001"),
        ("null", "null"),
    ],
)
def test_values_are_written_short(value: str, shown: str) -> None:
    assert short_value(value) == shown


@pytest.mark.slow
def test_in_mlflows_runs_table_at_1400_px_the_names_show_what_tells_them_apart(
    mlflow_server, tmp_path: Path
) -> None:
    """Runs named as a run and a sweep name them, in MLflow's UI in Chromium: the width the name model
    gives each is the browser's, and a child's own values show whole under its parent."""
    from tests.fighter.cdp import InspectedPage

    client = mlflow_server.client()
    experiment = client.create_experiment("names")
    singles = [_name("agent=dqn"), _name("agent=sb3_dqn"), _name("agent=ppo", "agent.hyperparams.n_epochs=5")]
    for name in singles:
        client.set_terminated(client.create_run(experiment, run_name=name).info.run_id)
    parent = client.create_run(
        experiment, run_name="sweep sb3-ppo lr=1e-4,1e-3 ne=5,10 seed=1,2 cartpole"
    ).info.run_id
    swept = [LR, EPOCHS, "seed"]  # the widest of common sweeps: two values and a seed
    children = [
        _child(["agent=ppo", f"{LR}={lr}", f"{EPOCHS}={ne}", f"seed={seed}"], swept)
        for lr, ne, seed in itertools.product(("0.0001", "0.001"), ("5", "10"), ("1", "2"))
    ]
    for name in children:
        run = client.create_run(experiment, run_name=name, tags={"mlflow.parentRunId": parent})
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent)
    page = InspectedPage(
        f"{mlflow_server.uri}/#/experiments/{experiment}/runs?workflowType=machine_learning",
        width=1400,
        height=900,
    )
    try:
        cells = "document.querySelectorAll('[col-id=\"attributes.`Run Name`\"] a span')"
        page.wait_in_page(f"{cells}.length >= {len(singles) + 1}", timeout=120)
        page.evaluate(  # the parent opened, as a person would
            'document.querySelector(\'[col-id="attributes.`Run Name`"] button'
            "[data-component-id*=runnamecellrenderer]').click()"
        )
        page.wait_in_page(f"{cells}.length >= {len(singles) + 1 + len(children)}", timeout=60)
        found = {  # the rows' layout once it stops changing
            text: (need, room)
            for text, need, room in page.steady(
                f"Array.from({cells}).map(s => [s.innerText, s.scrollWidth, s.clientWidth])"
            )
        }
        page.screenshot(tmp_path / "names.png")
    finally:
        page.close()
    assert set(singles + children) <= set(found), json.dumps(found)
    for name, (need, _) in found.items():
        assert abs(text_width(name) - need) <= 3, (name, need)  # the model is the browser's width
    for name in singles[:2]:
        assert found[name][0] <= found[name][1], (name, found[name])  # whole
    for name in children:  # each child's own values show, then `…`: what is cut is what siblings share
        own = name.split(" sb3-ppo")[0]
        assert text_width(f"{own} …") <= found[name][1], (name, found[name])


@pytest.mark.slow
def test_a_sweep_named_by_tracking_run_name_gives_its_parent_that_name_and_its_children_their_own(
    cli, tmp_path: Path
) -> None:
    """Each child's last lines say the name MLflow shows it, as a run's do."""
    from mlflow.tracking import MlflowClient

    r = cli("-m", "seed=1,2", "total_steps=256", "eval.episodes=1", "progress=off", "tracking.run_name=mine")
    assert r.returncode == 0, r.output[-3000:]
    said = [" ".join(line.split()[1:-1]) for line in r.stdout.splitlines() if line.startswith("  run  ")]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    (parent,) = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    assert parent.info.run_name == "mine"
    children = sorted(run.info.run_name for run in runs if run is not parent)
    assert len(children) == 2 and len(set(children)) == 2 and "mine" not in children, children
    assert sorted(said) == children, r.stdout


def test_a_name_given_by_tracking_run_name_stays_as_given_when_a_resume_raises_the_budget(
    cli, tmp_path: Path
) -> None:
    """It became `mine steps=512`, as a name the run's overrides made would."""
    from mlflow.tracking import MlflowClient

    r = cli("total_steps=256", "eval.episodes=1", "progress=off", "tracking.run_name=mine")
    assert r.returncode == 0, r.output[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    again = cli(f"resume={run.info.run_id}", "total_steps=512", "eval.episodes=1", "progress=off")
    assert again.returncode == 0, again.output[-3000:]
    assert client.get_run(run.info.run_id).info.run_name == "mine"
