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

from framework.checkpoint import AGENT_DIR, CONFIG_FILE, STATE_FILE, find_latest
from framework.commands import Parser

from .agent import STATE_FILE as AGENT_STATE_FILE
from .learner import WEIGHTS_FILE

PROVENANCE_FILE = "provenance.json"


def ship(run: Path, dest: Path, about: str) -> dict[str, Any]:
    """Write the last checkpoint of `run` to `dest`, its network alone; returns the provenance."""
    checkpoint = find_latest(run)
    if checkpoint is None:
        raise SystemExit(f"{run}: no checkpoint there")
    weights = torch.load(checkpoint / AGENT_DIR / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    state = json.loads((checkpoint / STATE_FILE).read_text())
    agent_state = json.loads((checkpoint / AGENT_DIR / AGENT_STATE_FILE).read_text())
    if dest.exists():
        shutil.rmtree(dest)
    (dest / AGENT_DIR).mkdir(parents=True)
    config = OmegaConf.load(checkpoint / CONFIG_FILE)
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
    (dest / "__init__.py").write_text(f'"""{textwrap.fill(about, 96)}"""\n')  # a lint's line length
    return provenance


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run directory (or one of its checkpoints)")
    parser.add_argument("dest", type=Path, help="the folder to write (replaced if it exists)")
    parser.add_argument("--about", default="A trained AlphaZero agent.", help="its one-line description")
    args = parser.parse_args(argv)
    provenance = ship(args.run, args.dest, args.about)
    size = sum(f.stat().st_size for f in args.dest.rglob("*") if f.is_file())
    print(f"{args.dest}: step {provenance['step']}, {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
