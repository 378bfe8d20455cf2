"""The search space of `hydra/sweeper=optuna`, in the override syntax hydra-optuna-sweeper users know.

    interval(a,b)               a float drawn uniformly from [a, b] (an int when both ends are ints)
    tag(log,interval(a,b))      the same, log-uniformly
    range(a,b[,step])           the values of Hydra's range (b excluded): an int (or stepped float)
    choice(x,y,...)             one of the values, as a category

Each swept key of the command line (or of the `hydra.sweeper.params` mapping) is a parameter of
the study; every other override is the same in every trial.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.errors import ConfigError

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from optuna.distributions import BaseDistribution

#: A category that stays a number in the study (plots, importances); any other is its override text.
NUMBER_TYPES = (bool, int, float)
SYNTAX = "interval(a,b), tag(log,interval(a,b)), range(a,b[,step]) or choice(x,y,...)"


@dataclass(frozen=True)
class SearchSpace:
    """The study's parameters (key → Optuna distribution) and the overrides every trial shares."""

    distributions: dict[str, BaseDistribution]
    fixed: list[str]

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        """A trial's command line: the fixed overrides and its own values."""
        return [*self.fixed, *(f"{key}={override_value(value)}" for key, value in params.items())]

    def grid(self) -> dict[str, list[Any]]:
        """Every parameter's values, for the grid sampler (which needs choice(...) or range(...))."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        grid: dict[str, list[Any]] = {}
        for key, dist in self.distributions.items():
            if isinstance(dist, CategoricalDistribution):
                grid[key] = list(dist.choices)
            elif isinstance(dist, IntDistribution) and not dist.log:
                grid[key] = list(range(dist.low, dist.high + 1, dist.step))
            elif isinstance(dist, FloatDistribution) and dist.step is not None:
                count = round((dist.high - dist.low) / dist.step) + 1
                grid[key] = [dist.low + i * dist.step for i in range(count)]
            else:
                raise ConfigError(
                    f"hydra.sweeper.sampler=grid needs a finite set of values for every swept key: {key} "
                    f"is an interval; give it as choice(...) or range(...), or choose sampler=tpe, cmaes or "
                    "random"
                )
        return grid


def search_space(arguments: Sequence[str], params: Mapping[str, Any] | None) -> SearchSpace:
    """The space of a sweep's command line and `hydra.sweeper.params`; a mistake is a ConfigError."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    lines = list(arguments) + [f"{key}={value}" for key, value in (params or {}).items()]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except HydraException as e:
        raise ConfigError(f"hydra/sweeper=optuna: {str(e).splitlines()[0]}") from None
    distributions: dict[str, BaseDistribution] = {}
    fixed = []
    for override in parsed:
        if not override.is_sweep_override():
            fixed.append(override.input_line)
            continue
        key = override.get_key_element()
        if override.is_hydra_override():
            raise ConfigError(
                f"hydra/sweeper=optuna: {override.input_line!r}: only config values can be searched"
            )
        distributions[key] = distribution(override)
    if not distributions:
        raise ConfigError(
            "hydra/sweeper=optuna needs at least one swept key to search, e.g. "
            "'agent.hyperparams.learning_rate=tag(log,interval(1e-5,1e-2))': " + SYNTAX
        )
    return SearchSpace(distributions, [line for line in fixed if line is not None])


def distribution(override: Override) -> BaseDistribution:
    """The Optuna distribution of one swept override."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep, Transformer
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    value = override.value()
    where = f"hydra/sweeper=optuna: {override.input_line!r}"
    unknown = sorted(set(getattr(value, "tags", ())) - {"log"})
    if unknown:
        raise ConfigError(
            f"{where}: tag {', '.join(unknown)} is not one the search space knows; it knows log"
        )
    if isinstance(value, IntervalSweep):
        low, high = value.start, value.end
        assert low is not None and high is not None
        log = "log" in value.tags
        if low >= high or (log and low <= 0):
            raise ConfigError(f"{where}: an interval needs low < high{' and low > 0 (log)' if log else ''}")
        if isinstance(low, int) and isinstance(high, int):
            return IntDistribution(low, high, log=log)
        return FloatDistribution(float(low), float(high), log=log)
    if isinstance(value, RangeSweep):
        values = [v for v in override.sweep_iterator() if isinstance(v, int | float)]
        if not values:
            raise ConfigError(f"{where}: the range is empty")
        step = abs(value.step if value.step is not None else 1)
        if all(isinstance(v, int) for v in values):
            return IntDistribution(int(min(values)), int(max(values)), step=int(step))
        return FloatDistribution(float(min(values)), float(max(values)), step=float(step))
    if isinstance(value, ChoiceSweep):
        choices = [
            v if isinstance(v, NUMBER_TYPES) else Transformer.str(v) for v in override.sweep_iterator()
        ]
        return CategoricalDistribution(choices)
    raise ConfigError(f"{where}: not a search space Optuna can sample; use {SYNTAX}")


def override_value(value: Any) -> str:
    """A sampled value as the text of an override (full precision: the run's name is what gets
    shortened); a category other than a number is its override text already."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)
