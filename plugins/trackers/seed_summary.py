"""Configurations over seeds: a sweep's (or a comparison's) runs grouped by everything but their
seed, each group's objective as IQM with its stratified-bootstrap interval, the probability that
each configuration improves on the best other one, and the plots: learning curves as IQM with a
band, performance profiles, probabilities of improvement (seed_plots.py)."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import seed_stats as ss
from .run_names import short_value

if TYPE_CHECKING:
    from .sweep_child import Child

SEED = "seed"
CURVES_PNG = "seeds_curves.png"
PROFILE_PNG = "seeds_profile.png"
IMPROVEMENT_PNG = "seeds_improvement.png"
#: A configuration's runs: every run when no setting differs.
ALL_RUNS = "all runs"

History = tuple[Sequence[int], Sequence[float]]
"""A run's objective as it logged it: (steps, values)."""


@dataclass(frozen=True)
class Configuration:
    """The finished runs that share every setting but their seed, and their objective's statistics."""

    label: str
    settings: tuple[tuple[str, str], ...]
    """(label, value) of each setting, the label a key's last part (`lr` for agent.hyperparams.lr)."""
    runs: tuple[Child, ...]
    iqm: ss.Estimate
    mean: float
    median: float
    """The median of the runs' objective."""
    improvement: ss.Estimate | None = None
    """P(a run of this configuration beats a run of the best other one); None when there is no other."""

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def scores(self) -> list[float]:
        return [float(c.objective or 0.0) for c in self.runs]


#: The keys of a schedule's mapping (framework.schedules): alone, `end=0.05` would not say whose.
SCHEDULE_KEYS = frozenset(
    {"kind", "value", "start", "end", "steps", "fraction", "endpoints", "outside_value"}
)


#: Seeds a configuration needs for its bootstrap interval to be more than rough (rliable's advice).
FEW_SEEDS = 5


def short_labels(keys: Sequence[str]) -> dict[str, str]:
    """Each key's last part (`learning_rate`), or more of it where two keys share their last part or
    it is a schedule's (`exploration.end`)."""
    labels: dict[str, str] = {}
    for key in keys:
        parts = key.split(".")
        depth = 2 if len(parts) > 2 and parts[-1] in SCHEDULE_KEYS else 1
        while depth < len(parts) and any(
            other != key and other.split(".")[-depth:] == parts[-depth:] for other in keys
        ):
            depth += 1
        labels[key] = ".".join(parts[-depth:])
    return labels


def settings_of(swept_keys: Sequence[str]) -> list[str]:
    """The swept keys that make a configuration: all but the seed."""
    return [k for k in swept_keys if k != SEED]


def seeded(children: Sequence[Child], swept_keys: Sequence[str]) -> bool:
    """Whether the runs repeat a configuration over seeds (so that a configuration has a spread)."""
    keys = settings_of(swept_keys)
    seen: set[tuple[str, ...]] = set()
    for c in children:
        if c.finished and c.objective is not None:
            key = tuple(c.params.get(k, "") for k in keys)
            if key in seen:
                return True
            seen.add(key)
    return False


def configurations(
    children: Sequence[Child],
    swept_keys: Sequence[str],
    mode: str,
    *,
    labels: Mapping[str, str] | None = None,
    most_settings: int | None = None,
    leading: Sequence[str] = (),
) -> list[Configuration]:
    """The finished children with a value of the objective, grouped by their settings (all swept keys but the
    seed), best IQM first; each run over seeds, beside another that was, with its probability of improving on
    the best other configuration so run. A label names the settings that set the configuration apart from its
    peers (`labels[key]`, else the key's last part), the first `most_settings` of them, and a number where two
    would be alike: its `leading` keys (the plugins, in `compare`), then the keys whose values differ between
    the configurations that share those (all the swept keys, in a sweep)."""
    keys = settings_of(swept_keys)
    named = labels or short_labels(keys)
    groups: dict[tuple[str, ...], list[Child]] = {}
    for c in children:
        if c.finished and c.objective is not None:
            groups.setdefault(tuple(c.params.get(k, "") for k in keys), []).append(c)
    lead = [i for i, k in enumerate(keys) if k in leading]
    sign = 1.0 if mode == "max" else -1.0
    found = []
    for values, runs in groups.items():
        scores = [float(c.objective or 0.0) for c in runs]
        stats = ss.as_scores(scores)
        settings = tuple((named.get(k, k), v) for k, v in zip(keys, values, strict=True))
        peers = [other for other in groups if all(other[i] == values[i] for i in lead)]
        shown = [
            f"{name}={short_value(v)}"
            for i, (name, v) in enumerate(settings)
            if v != "" and (i in lead or len({peer[i] for peer in peers}) > 1)
        ]
        cut = most_settings is not None and len(shown) > most_settings
        label = " ".join(shown[:most_settings] if cut else shown) + (" …" if cut else "")
        found.append(
            Configuration(
                label=label or ALL_RUNS,
                settings=settings,
                runs=tuple(runs),
                iqm=ss.estimate(scores),
                mean=float(ss.mean(stats)),
                median=float(ss.runs_median(stats)),
            )
        )
    found.sort(key=lambda c: -sign * c.iqm.value)
    found = _distinct(found)
    if len(found) < 2:
        return found
    with_improvement = []
    for config in found:
        rival = leader([c for c in found if c is not config])
        if config.n > 1 and rival.n > 1:  # one run is one sample: no chance drawn from it, 0 or 1
            config = dataclasses.replace(
                config, improvement=ss.improvement(config.scores, rival.scores, mode=mode)
            )
        with_improvement.append(config)
    return with_improvement


def _distinct(found: list[Configuration]) -> list[Configuration]:
    """The configurations, a label that several share numbered (`… #2`)."""
    seen: dict[str, int] = {}
    for c in found:
        seen[c.label] = seen.get(c.label, 0) + 1
    count: dict[str, int] = {}
    out = []
    for c in found:
        if seen[c.label] > 1:
            count[c.label] = count.get(c.label, 0) + 1
            c = dataclasses.replace(c, label=f"{c.label} #{count[c.label]}")
        out.append(c)
    return out


def leader(found: Sequence[Configuration]) -> Configuration:
    """The best IQM (`found` best first) of the configurations run over seeds; of all of them where
    none was (one run is no leader while a configuration with a spread is at hand)."""
    return next((c for c in found if c.n > 1), found[0])


def separated_best(found: Sequence[Configuration]) -> Configuration | None:
    """The best IQM of the configurations run over seeds (two runs or more: one run has no spread to
    give an interval), if its interval overlaps no other's; else None (the seeds cannot tell the
    leaders apart)."""
    spread = [c for c in found if c.n > 1]
    if len(spread) < 2:
        return None
    top = spread[0]
    return top if all(not top.iqm.overlaps(other.iqm) for other in spread[1:]) else None


def metric_name(kind: str, objective: str, config: Configuration, several: bool) -> str:
    """`iqm/eval/return_mean` (one configuration), `iqm/eval/return_mean/lr 0.001 gamma 0.9` (one
    of several): MLflow takes letters, digits, _ - . / and spaces in a metric's name."""
    if not several:
        return f"{kind}/{objective}"
    label = " ".join(f"{k} {v}" for k, v in config.settings)
    label = re.sub(r"[^\w.\- ]+", "_", label).strip() or "configuration"
    return f"{kind}/{objective}/{label}"[:250]


def metrics(found: Sequence[Configuration], objective: str) -> dict[str, float]:
    """The parent's metrics: each configuration's IQM, its interval, and its n."""
    several = len(found) > 1
    out: dict[str, float] = {}
    for config in found:
        for kind, value in (
            ("iqm", config.iqm.value),
            ("iqm_low", config.iqm.low),
            ("iqm_high", config.iqm.high),
        ):
            if kind == "iqm" or config.n > 1:  # one run: no interval
                out[metric_name(kind, objective, config, several)] = value
        if config.improvement is not None:
            out[metric_name("p_improve", objective, config, several)] = config.improvement.value
    return out


def rows(found: Sequence[Configuration]) -> list[dict[str, str]]:
    """The table's cells per configuration (best IQM first)."""
    best = separated_best(found)
    return [
        {
            "configuration": config.label,
            "n": str(config.n),
            "mean": _cell(config.mean),
            "median": _cell(config.median),
            "iqm": _cell(config.iqm.value),
            # one run: no interval (the page's "one run"), not one of zero width
            "iqm_low": _cell(config.iqm.low) if config.n > 1 else "",
            "iqm_high": _cell(config.iqm.high) if config.n > 1 else "",
            **{
                f"p_improve{end}": ""
                if config.improvement is None
                else _cell(getattr(config.improvement, part))
                for end, part in (("", "value"), ("_low", "low"), ("_high", "high"))
            },
            "best": "yes" if config is best else "",
        }
        for config in found
    ]


def verdict(found: Sequence[Configuration], objective: str) -> str:
    """One sentence: which configuration is best, or that the seeds cannot say. A configuration of
    one run is left out of the comparison (one run gives no interval)."""
    if not found:
        return "No configuration has a finished run with a value of the objective."
    spread = [c for c in found if c.n > 1]
    lone = len(found) - len(spread)
    if len(found) == 1:
        c = found[0]
        if c.n == 1:
            return (
                f"1 run: {objective} {c.iqm.value:.4g}; one run gives no interval (seeds=N runs a "
                "configuration over N seeds)."
            )
        return (
            f"{c.n} seeds: IQM of {objective} {c.iqm.value:.4g}, "
            f"95 % interval [{c.iqm.low:.4g}, {c.iqm.high:.4g}]."
        )
    left_out = ""
    if lone:
        alone = [c.label for c in found if c.n < 2]
        named = ", ".join(alone[:3]) + (", …" if len(alone) > 3 else "")
        left_out = (
            f"; {named} {'has a single run' if lone == 1 else 'have a single run each'}, so no interval, "
            f"and {'is' if lone == 1 else 'are'} left out of the comparison"
        )
    if len(spread) < 2:
        return (
            f"No configuration is best: {len(spread) or 'none'} of the {len(found)} ran over seeds, "
            "and one run gives no interval (seeds=N runs each configuration over N seeds)."
        )
    sizes = sorted({c.n for c in spread})
    n = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    best = separated_best(found)
    rough = f"; fewer than {FEW_SEEDS} give rough intervals" if sizes[0] < FEW_SEEDS else ""
    if best is not None:
        return (
            f"Best: {best.label}, its IQM's 95 % interval apart from every other's "
            f"({n} seeds each{rough}){left_out}."
        )
    return (
        f"No configuration is best: the leader's ({spread[0].label}) 95 % interval overlaps another's "
        f"({n} seeds each); more seeds would narrow them{left_out}."
    )


def section(found: Sequence[Configuration], objective: str, links: Mapping[str, str], address: str) -> str:
    """The page's table of configurations (best IQM first; the best marked only when its interval
    stands apart), with the verdict and each configuration's runs linked by seed."""
    from . import summary_page

    best = separated_best(found)
    body = []
    for config in found:
        chance = config.improvement
        improve = (
            "" if chance is None else f"{_shown(chance.value)} [{_shown(chance.low)}, {_shown(chance.high)}]"
        )
        runs = " ".join(
            summary_page.run_link(address, links[r.run_id], r.params.get(SEED) or r.name)
            if r.run_id in links
            else html.escape(r.params.get(SEED) or r.name)
            for r in config.runs
        )
        name = ("&#9733; " if config is best else "") + html.escape(config.label)
        body.append(
            f"<tr{' class=best' if config is best else ''}><td>{name}</td><td>{runs}</td>"
            f"<td class=n>{config.n}</td>"
            f"<td class=n>{_shown(config.iqm.value)} {_interval(config)}</td>"
            f"<td class=n>{_shown(config.mean)}</td><td class=n>{_shown(config.median)}</td>"
            f"<td class=n>{improve}</td></tr>"
        )
    head = "".join(
        f"<th{' class=n' if i > 1 else ''}>{h}</th>"
        for i, h in enumerate(
            [
                "configuration",
                "runs (seed)",
                "n",
                "IQM [95 % interval]",
                "mean",
                "median",
                "P(beats best other)",
            ]
        )
    )
    return (
        f"<h2>Configurations over seeds</h2><p>{html.escape(verdict(found, objective))} IQM: the mean of the "
        "middle half of the runs; intervals: 95 % stratified bootstrap (rliable's method); P: the chance "
        "that a run of the configuration beats a run of the best other one.</p>"
        f"<div class=scroll><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def markdown(found: Sequence[Configuration], objective: str, links: Mapping[str, str]) -> str:
    """The configurations for the parent's description: the verdict, a table, the plots' names."""
    best = separated_best(found)
    lines = [
        f"**Over seeds**: {verdict(found, objective)}",
        "",
        "| configuration | n | IQM [95 % interval] | P(beats the best other) | runs |",
        "|---|---:|---:|---:|---|",
    ]
    for config in found:
        chance = config.improvement
        improve = "" if chance is None else f"{chance.value:.2f} [{chance.low:.2f}, {chance.high:.2f}]"
        runs = " ".join(
            f"[{r.params.get(SEED) or r.name}]({links[r.run_id]})" if r.run_id in links else r.name
            for r in config.runs
        )
        mark = "★ " if config is best else ""
        label = config.label.replace("|", "\\|")
        lines.append(
            f"| {mark}{label} | {config.n} | {_shown(config.iqm.value)} {_interval(config)} "
            f"| {improve} | {runs} |"
        )
    plots = [CURVES_PNG, PROFILE_PNG, *([IMPROVEMENT_PNG] if len(found) > 1 else [])]
    lines += ["", f"Plots over seeds: {', '.join(plots)}; all of them in the summary page."]
    return "\n".join(lines)


def _interval(config: Configuration) -> str:
    """`[low, high]`, or what stands in its place for a single run."""
    if config.n < 2:
        return "(one run: no interval)"
    return f"[{_shown(config.iqm.low)}, {_shown(config.iqm.high)}]"


def _shown(v: float) -> str:
    """A figure as the page and the description show it: 4 significant digits (the CSV keeps 6)."""
    return f"{v:.4g}"


def _cell(v: float) -> str:
    return f"{v:.6g}"
