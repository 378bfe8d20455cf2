"""Multirun: one parent run per sweep, so every job lands beside its siblings in the tracker.

The parent holds the swept parameters; each child is named for its own values of them
(`n_epochs=5 seed=1`); when the sweep ends the tracker adds its summary (every child's
params, objective, status and duration, the objective across the swept values, the best child).
"""

from __future__ import annotations

import atexit
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from framework import config
from framework.contracts import SweepSummarySpec, Tracker
from framework.provenance import flatten

#: Environment variables that hand the sweep's parent run and swept keys to its jobs (in-process or spawned).
PARENT_RUN_ENV = "FRAMEWORK_PARENT_RUN_ID"
SWEPT_KEYS_ENV = "FRAMEWORK_SWEPT_KEYS"


def swept_values(overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The swept keys of a multirun command line (and of `hydra.sweeper.params`), with their values."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    swept = {
        o.get_key_element().lstrip("+~"): str(o.input_line).partition("=")[2]
        for o in parsed
        if o.is_sweep_override()
    }
    for key, value in (sweeper_params or {}).items():
        swept.setdefault(str(key), str(value))
    return swept


def labels(keys: Sequence[str]) -> dict[str, str]:
    """A short label per key: its last part (`agent.hyperparams.n_epochs` → `n_epochs`), unless shared."""
    short = {key: key.rsplit(".", 1)[-1] for key in keys}
    taken = list(short.values())
    return {key: label if taken.count(label) == 1 else key for key, label in short.items()}


def child_run_name(job_overrides: Sequence[str], swept_keys: Sequence[str]) -> str | None:
    """`n_epochs=5 seed=1`: a job's own values of the swept keys, by label; None outside a sweep."""
    if not swept_keys:
        return None
    values = {}
    for override in job_overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if sep and key in swept_keys:
            values[key] = value
    named = labels(list(values))
    return " ".join(f"{named[key]}={values[key]}" for key in sorted(values, key=lambda k: named[k])) or None


class SweepParentRun(Callback):
    """Opens the parent run before the first job and closes it, with the sweep's summary, after the last."""

    def __init__(self) -> None:
        self._tracker: Tracker | None = None
        self._run_id: str | None = None
        self._spec: SweepSummarySpec | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        section = _tracking(config)
        if section is None:
            return
        params = OmegaConf.select(config, "hydra.sweeper.params")
        sweeper_params = OmegaConf.to_container(params) if isinstance(params, DictConfig) else None
        swept = swept_values(list(config.hydra.overrides.task), sweeper_params)  # type: ignore[arg-type]
        named = labels(list(swept))
        self._spec = SweepSummarySpec(
            swept_keys=tuple(swept),
            objective=str(config.objective.metric),
            mode=str(config.objective.mode),
        )
        self._tracker = section.plugin(section.cfg)
        overrides = " ".join(config.hydra.overrides.task)
        title = " ".join(f"{named[k]}={swept[k]}" for k in sorted(swept, key=lambda k: named[k]))
        self._run_id = self._tracker.start_parent(
            run_name=f"sweep {title or overrides}"[:250],
            tags={
                "framework.sweep_dir": str(config.hydra.sweep.dir),
                "framework.overrides": overrides[:5000],
                "framework.swept_keys": json.dumps(list(swept)),
                "framework.objective": self._spec.objective,
            },
            params={
                **common_params(config, swept),
                **{f"sweep.{key}": value for key, value in swept.items()},
            },
            start_time=time.time(),
        )
        os.environ[PARENT_RUN_ENV] = self._run_id
        os.environ[SWEPT_KEYS_ENV] = json.dumps(list(swept))
        # A job that raises ends the sweep without on_multirun_end: the parent still ends, FAILED.
        atexit.register(self._end, "FAILED")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end("FINISHED")

    def _end(self, status: str) -> None:
        if self._run_id is None or self._tracker is None or self._spec is None:
            return
        run_id, self._run_id = self._run_id, None
        os.environ.pop(PARENT_RUN_ENV, None)
        os.environ.pop(SWEPT_KEYS_ENV, None)
        try:
            said = self._tracker.end_parent(run_id, status, summary=self._spec, end_time=time.time())
            if said:
                print(said, flush=True)
        finally:
            self._tracker.close()


def common_params(cfg: DictConfig, swept: Mapping[str, str]) -> dict[str, str]:
    """The flattened config every job shares: all but the swept keys (and what a swept group holds)."""
    data = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(data, dict)
    data.pop("hydra", None)
    return {
        key: value
        for key, value in flatten(data).items()
        if not any(key == k or key.startswith(f"{k}.") for k in swept)
    }


def swept_keys_of_this_sweep() -> list[str]:
    """The swept keys the parent handed down, in a job of a sweep; [] elsewhere."""
    raw = os.environ.get(SWEPT_KEYS_ENV)
    return [str(k) for k in json.loads(raw)] if raw else []


def _tracking(cfg: DictConfig) -> config.Section | None:
    if cfg.get("tracking") is None:
        return None
    return config.plugin_section(cfg, "tracking")
