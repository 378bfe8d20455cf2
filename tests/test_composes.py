"""A run's config composed once (framework/composes.py), where Hydra composed it three times: the
config, Hydra's own, the preset a run's name is told from and every refusal are what Hydra's
composes give."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: A command line run with its task replaced: what it saw, as JSON, on the last line of stderr.
#: With HYDRA_OWN set, Hydra composes as it does (framework/composes.py not installed).
SEEN = """
import json, os, sys
from omegaconf import OmegaConf
from hydra.core.hydra_config import HydraConfig
from framework import app, composes, config
from framework_plugins.trackers import run_names

loads = []
load = composes._load
composes._load = lambda *a, **k: loads.append(1) or load(*a, **k)
if os.environ.get("HYDRA_OWN"):
    composes.install = lambda: None
    composes.without_values = lambda keys: None
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    ConfigLoaderImpl.load_configuration = lambda self, *a, **k: loads.append(1) or load(self, *a, **k)

def task(cfg):
    hc = HydraConfig.instance().cfg
    overrides = config.task_overrides(hc.hydra.overrides.task)
    preset = run_names.preset_of(overrides)
    seen = {
        "cfg": OmegaConf.to_container(cfg, resolve=False),
        "hydra": OmegaConf.to_container(hc.hydra, resolve=False),
        "preset": None if preset is None else OmegaConf.to_container(preset.agent, resolve=False),
        "name": run_names.run_name(cfg, "cartpole", overrides, preset),
        "loads": len(loads),
    }
    print(json.dumps(seen, default=str), file=sys.stderr)

app.task = task
sys.argv[0] = "framework"
app.main()
"""


def seen(args: list[str], cwd: Path, own: bool) -> tuple[int, str, list[dict[str, Any]]]:
    """Exit status, stderr less the task's lines and timestamps, and what each job saw (its own
    directory and the sweep's, named by the second, left out)."""
    done = subprocess.run(
        [sys.executable, "-c", SEEN, *args, "hydra.run.dir=run"],
        cwd=cwd,
        env={**os.environ, **({"HYDRA_OWN": "1"} if own else {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stderr.splitlines()
    jobs = [json.loads(line) for line in lines if line.startswith("{")]
    for job in jobs:
        job["hydra"]["runtime"].pop("output_dir")
        job["hydra"]["runtime"].pop("cwd")
        job["hydra"].pop("sweep")
    said = "\n".join(re.sub(r"\[\d\d:\d\d:\d\d\]", "", line) for line in lines if not line.startswith("{"))
    return done.returncode, said, jobs


@pytest.mark.parametrize(
    "args",
    [
        ["agent=ppo", "agent.hyperparams.learning_rate=3e-4", "seed=3", "total_steps=5000"],
        ["experiment=gomoku_9x9", "agent.learning_rate=0.002", "search.num_simulations=32"],
    ],
)
def test_a_run_composes_once_what_hydras_three_composes_gave(args: list[str], tmp_path: Path) -> None:
    ours, hydras = (seen(args, tmp_path, own) for own in (False, True))
    assert ours[0] == hydras[0] == 0, ours[1][-3000:] + hydras[1][-3000:]
    ((job,), (hydra_job,)) = ours[2], hydras[2]
    assert (job.pop("loads"), hydra_job.pop("loads")) == (1, 3)
    assert job == hydra_job
    assert job["hydra"]["mode"] == "RunMode.RUN"
    assert job["hydra"]["overrides"]["hydra"][-1] == "hydra.mode=RUN"
    assert job["preset"] is not None  # the values a preset holds already are not named
    assert job["name"] in ("sb3-ppo-s3 lr=3e-4 steps=5k cartpole", "alphazero-s0 gomoku_9x9")


@pytest.mark.parametrize(
    "args",
    [
        ["seed=1,2"],  # a sweep's values without -m
        # (Sweeps untracked: a parent run's tracking process composes nothing, in seconds of CPU.)
        ["hydra.mode=MULTIRUN", "seed=1,2", "agent.gamma=0.9", "tracking=none"],
        ["-m", "seed=1,2", "agent.gamma=0.9", "tracking=none"],
        ["agent.lr=1"],
    ],
)
def test_a_command_line_hydra_refuses_or_sweeps_is_treated_as_hydra_treats_it(
    args: list[str], tmp_path: Path
) -> None:
    ours, hydras = (seen(args, tmp_path, own) for own in (False, True))
    assert ours[:2] == hydras[:2]
    assert [len(ours[2]), len(hydras[2])] == [2 if "seed=1,2" in args and args != ["seed=1,2"] else 0] * 2
    loads = [[job.pop("loads") for job in jobs] for jobs in (ours[2], hydras[2])]
    assert ours[2] == hydras[2]
    if ours[2]:  # each job's preset is taken from its own compose
        assert loads[0][-1] < loads[1][-1], loads
