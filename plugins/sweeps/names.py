"""A sweep's runs named for what sets them apart (the trackers' run_names name a run of its own).

A sweep's child starts with its own values of the swept keys, then what it shares with its
siblings: `lr=1e-3 ne=5 sb3-ppo-s0 cartpole`, or, with a seed swept too, `lr1e-3 ne5 s1 sb3-ppo
cartpole`. MLflow 3.17's runs table gives a child under its parent 98 px (about 17 characters) and
ends what it cuts with `…`: its own values come first, with labels made short (then glued to their
numbers) until they fit there. The parent is named in a run's order, with the swept values: `sweep
sb3-ppo-s0 lr=1e-4,3e-4 ne=5,10 cartpole`.

`SweepParentRun` names each job as Hydra starts it and hands the name down (the core's
RUN_NAME_ENV); the core keeps it, as it keeps a name given from code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from framework.provenance import flatten
from framework_plugins.trackers.run_names import (
    MOST_CHARS,
    base_name,
    config_hash,
    config_overrides,
    exact,
    label_options,
    labels,
    override_parts,
    short_value,
    text_width,
    where,
    who,
)

#: What MLflow 3.17's runs table gives a child's name under its parent at 1400 px, less a margin
#: for wider fonts (run_names.NAME_PX); a name cut there ends with `…` (12 px).
CHILD_NAME_PX = 98 * 0.95
CHILD_VALUES_PX = CHILD_NAME_PX - 12
#: A swept value as wide as most (`1e-4` and `10` around it), for choosing a sweep's labels.
TYPICAL_VALUE = "100"
#: A value an Optuna study draws, as a name shows it (3 significant digits).
TYPICAL_DRAWN = "1.23e-3"


def job_name(
    cfg: DictConfig, overrides: Sequence[str], named: Sequence[str], swept: Sequence[str], trial: int | None
) -> str | None:
    """A sweep's job: its own values (`child_run_name`), then what it shares with its siblings
    (`child_name`); `named`: the overrides a name may say (framework.config.named_overrides)."""
    own = child_run_name(overrides, swept, trial)
    return None if own is None else child_name(own, cfg, None, named, swept)


def child_run_name(
    job_overrides: Sequence[str], swept_keys: Sequence[str], trial: int | None = None
) -> str | None:
    """`lr=3e-4 epochs=10`, `lr3e-4 ne10 s1`: a sweep's job by its own values of the swept keys, in
    the sweep's style (`sweep_style`; `#3 lr=…` for an Optuna trial); None outside a sweep.
    `child_name` adds what the job shares with its siblings."""
    if not swept_keys:
        return None
    values = {}
    for override in job_overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if sep and key in swept_keys:
            values[key] = value
    name = sweep_style(swept_keys, trials=trial is not None).values(values)
    return (f"#{trial} {name}" if trial is not None else name).strip() or None


def child_name(
    own: str, cfg: DictConfig, env_name: str | None, overrides: Sequence[str], swept_keys: Sequence[str]
) -> str:
    """A sweep's child: its own values (`child_run_name`), then its env, agent and seed as far as
    the sweep does not vary them; the config hash where the name leaves a difference out (the
    sweep's other overrides, a value rounded)."""
    own_values = {k: v for k, v in config_overrides(overrides) if k in swept_keys}
    hidden = [k for k, _ in config_overrides(overrides) if k not in swept_keys]
    whole = not hidden and all(v is None or exact(v) for v in own_values.values())
    return _bounded(own, [base_name(cfg, env_name, overrides, swept_keys)], whole, cfg)


def parent_run_name(
    cfg: DictConfig, swept: Mapping[str, str], overrides: Sequence[str], study: str | None = None
) -> str:
    """A sweep's parent, in a run's order: `sweep sb3-ppo-s0 lr=1e-4,3e-4 ne=5,10 envs=4 cartpole`:
    what its children share of agent and seed, the swept values with its children's labels, the
    overrides every job has, and the env. An Optuna study: its parameters' labels, and its name,
    first where the command line gave one (`sweep tune-ppo: sb3-ppo-s0 lr ne cartpole`), last where
    the sweeper named it by the time (`sweep sb3-ppo-s0 lr ne cartpole (study-20261128-055330)`)."""
    named = sweep_style(list(swept), trials=study is not None).labels
    order = _sweep_order(swept, named)
    if study is not None:
        values = " ".join(named[k] for k in order)
    else:
        values = " ".join(f"{named[k]}={_short_values(swept[k])}" for k in order)
    fixed = override_parts([(k, v) for k, v in config_overrides(overrides) if k not in swept])
    head, place = who(cfg, overrides, list(swept)), where(cfg, None, overrides, list(swept))
    timed = study is not None and re.fullmatch(r"study-\d{8}-\d{6}", study) is not None
    first = f"{study}:" if study is not None and not timed else ""
    last = f"({study})" if timed else ""
    return " ".join(p for p in ("sweep", first, head, values, *fixed, place, last) if p)[:250]


@dataclass(frozen=True)
class SweepStyle:
    """How a sweep's children write their values: by these labels, with `=` (`lr=3e-4`), or, where
    that is too wide for the runs table, a number right after its label (`lr3e-4 ne10`, as `s1`)."""

    labels: dict[str, str]
    glued: bool = False

    def values(self, values: Mapping[str, str]) -> str:
        """A child's own values, by label, its seed last: the configuration, then which seed."""
        return " ".join(self._part(key, values[key]) for key in _sweep_order(values, self.labels))

    def _part(self, key: str, value: str) -> str:
        shown = short_value(value)
        if key == "seed":
            return f"s{shown}"
        glue = self.glued and shown[:1].isdigit() and shown[-1:].isdigit()
        return f"{self.labels[key]}{'' if glue else '='}{shown}"


def sweep_style(keys: Sequence[str], *, trials: bool = False) -> SweepStyle:
    """A sweep's style: readable labels (`epochs`), the longest made short (`ne`) one by one, then
    numbers glued to their labels, until a child's values (each as wide as TYPICAL_VALUE) fit the
    room CHILD_VALUES_PX leaves them under their parent. An Optuna study's trials (`trials`) draw
    values of 3 significant digits (TYPICAL_DRAWN) and start with their number (`#12 `)."""
    keys, short = sorted(keys), list[str]()
    value = TYPICAL_DRAWN if trials else TYPICAL_VALUE
    typical = {key: "1" if key == "seed" else value for key in keys}
    room = CHILD_VALUES_PX - (text_width("#10 ") if trials else 0)
    while True:
        style = SweepStyle(labels(keys, short=short))
        longer = [k for k in keys if k not in short and label_options(k, True)[0] != style.labels[k]]
        if text_width(style.values(typical)) <= room:
            return style
        if not longer:
            return SweepStyle(style.labels, glued=True)
        short.append(max(longer, key=lambda k: text_width(style.labels[k])))


def _short_values(values: str) -> str:
    """A swept key's values on the parent (`1e-4,3e-4`); a sweep function (`range(5)`) as given."""
    if any(c in values for c in "()[]{}"):
        return values
    return ",".join(short_value(v) for v in values.split(","))


def _sweep_order(values: Mapping[str, Any], named: Mapping[str, str]) -> list[str]:
    """By label, the seed last: the configuration, then which of its seeds."""
    return sorted(values, key=lambda k: (k == "seed", named[k]))


def _bounded(first: str, more: Sequence[str], whole: bool, cfg: DictConfig) -> str:
    """`first` and as many of `more` as MOST_CHARS allows, with the config hash where a difference
    is left out of the name (`whole` False)."""
    name = first
    for i, part in enumerate(more):
        if len(f"{name} {part}") > MOST_CHARS - len(" cfg:0000"):
            whole = whole and not any(more[i:])
            break
        name = f"{name} {part}".strip()
    return name if whole else f"{name} cfg:{config_hash(cfg)}"


def common_params(cfg: DictConfig, swept: Mapping[str, str]) -> dict[str, str]:
    """The flattened config every job shares: all but the swept keys (and what a swept group holds)."""
    data = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(data, dict)
    data.pop("hydra", None)
    return {
        key: _resolved(cfg, key, value)
        for key, value in flatten(data).items()
        if not any(key == k or key.startswith(f"{k}.") for k in swept)
    }


def _resolved(cfg: DictConfig, key: str, value: str) -> str:
    """A param as a run logs it, its interpolation resolved (`${oc.env:MLFLOW_TRACKING_URI,…}`)."""
    if "${" not in value:
        return value
    try:
        return str(OmegaConf.select(cfg, key, throw_on_resolution_failure=True))
    except Exception:  # one only a job can resolve: as written
        return value
