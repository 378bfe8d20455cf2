"""A third-party plugin's own bugs said in one line naming it and its distribution (they were Hydra's
tracebacks naming neither), its INFO lines shown, and a printed command that works with its tracker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.test_registry import _env, conf_package, fake_distribution, refused_run
from tests.test_third_party import PLUGINS, cli

BUGS = (
    PLUGINS
    + '''

class InitBoom(Forgetful):
    """Raises as it is built."""

    def __init__(self, cfg: Any) -> None:
        raise RuntimeError("boom in init")


class NoMaker(StillEnv):
    """Makes no env."""

    def make(self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None):
        return None


import json as _json
from pathlib import Path as _Path

from framework_plugins.trackers.null_tracker import NullTracker


class Notebook:
    """Keeps each run's tags in notebook.json of the directory it runs in."""

    # What it does not keep, it does as tracking=none does (not a NullTracker: it tracks).
    Config = NullTracker.Config
    __init__ = NullTracker.__init__
    name_run = NullTracker.name_run
    log_params = NullTracker.log_params
    log_metrics = NullTracker.log_metrics
    log_artifact = NullTracker.log_artifact
    set_tags = NullTracker.set_tags
    end_run = NullTracker.end_run
    download_artifacts = NullTracker.download_artifacts
    start_parent = NullTracker.start_parent
    end_parent = NullTracker.end_parent
    close = NullTracker.close

    def how_to_view(self, run_id):
        return "notebook.json"

    def start_run(self, *, run_name, tags, parent_run_id=None, resume_run_id=None, start_time=None):
        NullTracker.start_run(self, run_name=run_name, tags=tags, resume_run_id=resume_run_id)
        book = _Path("notebook.json")
        runs = _json.loads(book.read_text()) if book.exists() else {}
        runs.setdefault(self.run_id, {}).update(tags)
        book.write_text(_json.dumps(runs))

    def run_tags(self, run_id):
        runs = _json.loads(_Path("notebook.json").read_text())
        if run_id not in runs:
            raise LookupError(f"no run {run_id} in notebook.json")
        return runs[run_id]


class Unreachable(Notebook):
    """Its store does not answer."""

    def start_run(self, **kwargs):
        raise ConnectionError("notebook server at 127.0.0.1:1 refused")
'''
)
ENTRY_POINTS = (
    "[framework.envs]\nstill = third_party_plugins:StillEnv\nnomaker = third_party_plugins:NoMaker\n"
    "[framework.agents]\nforgetful = third_party_plugins:Forgetful\ninitboom = third_party_plugins:InitBoom\n"
    "backwards = third_party_plugins:Backwards\n"
    "[framework.trackers]\nnotebook = third_party_plugins:Notebook\n"
    "unreachable = third_party_plugins:Unreachable\n"
    "[framework.conf]\nbugs = bugs_conf\n"
)
SERVICE = '''
import logging
from dataclasses import dataclass


@dataclass
class LoudConfig:
    fail: bool = False


class Loud:
    """A service that says what it does."""

    Config = LoudConfig

    def __init__(self, cfg):
        self.cfg = cfg

    def open(self):
        logging.getLogger("loud_service").info("loud service opens")
        if self.cfg.fail:
            raise OSError("loud service cannot bind 127.0.0.1:1")

    def close(self, *, at_once=False):
        logging.getLogger("loud_service").info("loud service closes")


def nothing(argv):
    return None
'''


def _installed(root: Path) -> Path:
    fake_distribution(root, "bugs", ENTRY_POINTS, "third_party_plugins", BUGS)
    options = [("env", "still"), ("env", "nomaker"), ("agent", "forgetful"), ("agent", "initboom")]
    options += [("agent", "backwards"), ("tracking", "notebook"), ("tracking", "unreachable")]
    for group, option in options:
        if not (root / "bugs_conf" / group).exists():
            conf_package(root, "bugs_conf", group, option)
        (root / "bugs_conf" / group / f"{option}.yaml").write_text(f"name: {option}\n")
    return root


def test_a_plugin_that_raises_as_it_is_built_or_starts_is_one_line_naming_it(tmp_path: Path) -> None:
    root = _installed(tmp_path)
    said = refused_run(root, "env=still", "agent=initboom", "total_steps=5")
    assert (
        "Error: The agent plugin 'initboom' (third_party_plugins:InitBoom, from bugs 1.2.3) raised "
        "RuntimeError as it was built: boom in init (HYDRA_FULL_ERROR=1 shows where)" in said
    ), said
    out = cli(root, "env=still", "agent=forgetful", "tracking=unreachable", "total_steps=5")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert (
        "The tracker plugin 'unreachable' (third_party_plugins:Unreachable, from bugs 1.2.3) raised "
        "ConnectionError as it started the run: notebook server at 127.0.0.1:1 refused"
    ) in " ".join(out.stderr.split()), out.stderr
    full = subprocess.run(
        [sys.executable, "-m", "framework", "env=still", "agent=initboom", "tracking=none"],
        env={**_env(root), "HYDRA_FULL_ERROR": "1"}, cwd=root, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert "Traceback" in full.stderr and 'raise RuntimeError("boom in init")' in full.stderr


def test_an_env_plugin_whose_make_returns_no_env_fails_the_run_naming_it(tmp_path: Path) -> None:
    root = _installed(tmp_path)
    out = cli(root, "env=nomaker", "agent=forgetful", "total_steps=5", "tracking=none")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "env=nomaker: its make() returned NoneType, not a gymnasium.Env" in " ".join(out.stderr.split())


def test_the_printed_command_resuming_by_id_names_a_third_party_tracker(tmp_path: Path) -> None:
    root = _installed(tmp_path)
    out = cli(
        root, "env=still", "agent=backwards", "tracking=notebook", "total_steps=20", "eval.at_start=false"
    )
    assert out.returncode == 1, out.stderr[-3000:]
    run_id = next(iter(json.loads((root / "notebook.json").read_text())))
    printed = re.search(rf"or python -m framework (resume={run_id}\S* .*)", out.stdout + out.stderr)
    assert printed is not None and printed.group(1).split() == [f"resume={run_id}", "tracking=notebook"], (
        out.stdout + out.stderr
    )
    again = cli(root, *printed.group(1).split())  # found: its checkpoint (which this agent cannot load)
    said = " ".join((again.stdout + again.stderr).split())
    assert "neither a run directory nor a tracked run" not in said, said
    assert "step_0000000010 cannot be loaded: agent=backwards's load raised KeyError" in said, said


def test_a_services_info_lines_show_and_its_failure_to_open_is_one_line(tmp_path: Path) -> None:
    fake_distribution(
        tmp_path, "loud", "[framework.services]\nloud = loud_service:Loud\n", "loud_service", SERVICE
    )
    out = cli(tmp_path, "total_steps=64", "eval.episodes=1", "tracking=none")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "loud service opens" in out.stdout + out.stderr
    said = refused_run(tmp_path, "loud.fail=true", "total_steps=64")
    assert (
        "Error: The service plugin 'loud' (loud_service:Loud, from loud 1.2.3) raised OSError as it opened: "
        "loud service cannot bind 127.0.0.1:1" in said
    ), said


def test_an_expansion_that_returns_no_arguments_is_one_line_naming_it(tmp_path: Path) -> None:
    expansion = "[framework.expansions]\nnothing = loud_service:nothing\n"
    fake_distribution(tmp_path, "loud", expansion, "loud_service", SERVICE)
    out = cli(tmp_path, "--help")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert (
        "Error: The expansion plugin 'nothing' (loud_service:nothing, from loud 1.2.3) raised TypeError (its "
        "contract): expand(argv) returned None, not a list of arguments"
    ) in " ".join(out.stderr.split()), out.stderr
