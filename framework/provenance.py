"""What a run records about itself: flattened params and provenance tags."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from framework import __version__

#: Packages whose versions are tagged on every run, when installed.
TRACKED_PACKAGES = (
    "numpy",
    "gymnasium",
    "torch",
    "stable-baselines3",
    "sb3-contrib",
    "ale-py",
    "mlflow",
    "hydra-core",
    "omegaconf",
)


def flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    """`{"a": {"b": 1}}` → `{"a.b": "1"}`; lists stay whole, as their string form."""
    flat: dict[str, str] = {}
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            flat.update(flatten(value, f"{prefix}{key}."))
    else:
        flat[prefix[:-1]] = str(tree)
    return flat


def git_commit(cwd: Path | None = None) -> str | None:
    """The commit checked out in the working directory's repository, if any."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def run_tags(plugins: Mapping[str, str], run_dir: Path, overrides: Sequence[str]) -> dict[str, str]:
    tags = {
        "framework.version": __version__,
        "framework.run_dir": str(run_dir.resolve()),
        "framework.overrides": " ".join(overrides)[:5000],
        "versions.python": sys.version.split()[0],
    }
    for kind, name in plugins.items():
        tags[f"plugin.{kind}"] = name
    for package in TRACKED_PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            tags[f"versions.{package}"] = version(package)
    return {**tags, **source_tags()}


def source_tags() -> dict[str, str]:
    """The commit of the repository the command runs in, if any (a sweep's parent has it too)."""
    commit = git_commit()
    return {"git.commit": commit} if commit else {}


#: How many times a tracked run was resumed; resume N's own tags are `framework.resumeN.*`.
RESUMES_TAG = "framework.resumes"
#: A resumed run's total_steps, which its param (logged as it first started) cannot say.
TOTAL_STEPS_TAG = "framework.total_steps"


def resume_tags(
    number: int, run_dir: Path, overrides: Sequence[str], step: int, total_steps: int
) -> dict[str, str]:
    """Resume `number`'s tags, beside the run's own (which keep its first start's dir and command line)."""
    prefix = f"framework.resume{number}"
    return {
        RESUMES_TAG: str(number),
        f"{prefix}.run_dir": str(run_dir.resolve()),
        f"{prefix}.overrides": " ".join(overrides)[:5000],
        f"{prefix}.from_step": str(step),
        "framework.resumed_from_step": str(step),
        TOTAL_STEPS_TAG: str(total_steps),
    }


def resumes(tags: Mapping[str, str]) -> int:
    """How many times the run with these tags was resumed."""
    value = tags.get(RESUMES_TAG, "0")
    return int(value) if value.isdigit() else 0


def run_dir_of(tags: Mapping[str, str]) -> str | None:
    """The directory a tracked run went on in last: its latest resume's, else its own."""
    for number in range(resumes(tags), 0, -1):
        found = tags.get(f"framework.resume{number}.run_dir")
        if found:
            return found
    return tags.get("framework.run_dir")
