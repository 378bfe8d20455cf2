"""A trained run's agent written as a checkpoint a plugin can ship: the run's config, its best network
alone (no optimizer state, no replay), and where it came from.

    python -m framework_plugins.alphazero.ship RUN DEST [--about TEXT]

DEST becomes a Python package (its `__init__.py` says what the agent is), so that a distribution
can register it in the entry-point group `framework.trained` (`NAME = "package.of.DEST"`); then
`python -m framework play NAME` and `gomocup NAME` play it with no run of one's own.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from framework.checkpoint import AGENT_DIR, CONFIG_FILE, STATE_FILE, find_latest, where_it_went_on
from framework.columns import refuse
from framework.commands import Parser
from framework.errors import ConfigError

from .agent import STATE_FILE as AGENT_STATE_FILE
from .learner import WEIGHTS_FILE

PROVENANCE_FILE = "provenance.json"


#: What a folder `ship` wrote holds: such a folder, and only such (or an empty one), is written over.
SHIPPED = {AGENT_DIR, CONFIG_FILE, STATE_FILE, PROVENANCE_FILE, "__init__.py", "__pycache__"}


def ship(run: Path, dest: Path, about: str) -> dict[str, Any]:
    """Write the last checkpoint of `run` to `dest`, its network alone; returns the provenance. A
    mistake (no such run, another agent's, a `dest` holding other files) is a ConfigError."""
    if not run.is_dir():
        what = "not a directory" if run.exists() else "no such directory"
        raise ConfigError(
            f"{run}: {what}; RUN is a run directory (the `run dir` line a run prints) or one of its "
            "checkpoints/step_* folders"
        )
    checkpoint = find_latest(where_it_went_on(run) or run)
    if checkpoint is None:
        raise ConfigError(f"{run}: no checkpoint there (a run directory holds checkpoints/latest)")
    config = OmegaConf.load(checkpoint / CONFIG_FILE)
    agent, env_name = OmegaConf.select(config, "agent.name"), OmegaConf.select(config, "env.name")
    if agent != "alphazero":
        raise ConfigError(
            f"{run}: that run trained agent={agent} on env={env_name}; ship writes an AlphaZero agent"
        )
    _check_dest(dest, run, checkpoint)
    weights = torch.load(checkpoint / AGENT_DIR / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    state = json.loads((checkpoint / STATE_FILE).read_text())
    agent_state = json.loads((checkpoint / AGENT_DIR / AGENT_STATE_FILE).read_text())
    if dest.exists():
        shutil.rmtree(dest)  # an earlier ship's, or empty (_check_dest)
    (dest / AGENT_DIR).mkdir(parents=True)
    config.resume = None  # a run resumed to its end: where it resumed from is this machine's path
    OmegaConf.save(config, dest / CONFIG_FILE)
    (dest / STATE_FILE).write_text(
        json.dumps({"step": state["step"], "seed": state.get("seed", 0)}, indent=1)
    )
    torch.save({"best": weights["best"]}, dest / AGENT_DIR / WEIGHTS_FILE)
    (dest / AGENT_DIR / AGENT_STATE_FILE).write_text(json.dumps(agent_state, indent=1))
    env = OmegaConf.select(config, "env", default=None) or {}
    provenance = {
        "board_size": env.get("board_size"),
        "n_in_row": env.get("n_in_row"),
        "run_id": state.get("run_id"),
        "step": state["step"],
        "games": agent_state["counters"]["games"],
        "network": agent_state["network"],
        "last_evaluation": state.get("last_eval", {}),
        "about": about,
    }
    (dest / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=1))
    docstring = textwrap.fill(about.replace("\\", "\\\\").replace('"', '\\"'), 96)  # a lint's line length
    (dest / "__init__.py").write_text(f'"""{docstring}"""\n')
    return provenance


def _check_dest(dest: Path, run: Path, checkpoint: Path) -> None:
    """Refuse a `dest` that holds anything but what an earlier `ship` wrote, or the run's own files."""
    where = dest.resolve()
    for source in (run.resolve(), checkpoint.resolve()):
        if source.is_relative_to(where) or where.is_relative_to(source):
            raise ConfigError(
                f"{dest}: DEST would hold or be inside the run it ships ({run}); give another folder"
            )
    if dest.exists() and not dest.is_dir():
        raise ConfigError(
            f"{dest}: a file is there; DEST is a folder to write (new, empty, or an earlier ship's)"
        )
    others = sorted(p.name for p in dest.iterdir() if p.name not in SHIPPED) if dest.is_dir() else []
    if others or (dest.is_dir() and any(dest.iterdir()) and not (dest / PROVENANCE_FILE).is_file()):
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "") if others else "files of its own"
        raise ConfigError(
            f"{dest} holds {shown}: ship writes a new or empty folder, or over one it wrote before, and "
            "removes nothing else"
        )


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        prog="python -m framework_plugins.alphazero.ship",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", type=Path, help="a run directory (or one of its checkpoints)")
    parser.add_argument(
        "dest", type=Path, help="the folder to write: new, empty, or one ship wrote before (replaced)"
    )
    parser.add_argument("--about", default="A trained AlphaZero agent.", help="its one-line description")
    args = parser.parse_args(argv)
    try:
        provenance = ship(args.run, args.dest, args.about)
    except ConfigError as e:
        refuse(str(e))
        return 1
    size = sum(f.stat().st_size for f in args.dest.rglob("*") if f.is_file())
    print(f"{args.dest}: step {provenance['step']}, {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
