"""Everything a set of runs is summarised into, for a sweep's parent and for `compare` alike: the
table (CSV and page), the objective across the swept values, heat maps and, when configurations
repeat over seeds, their statistics and plots."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import seed_plots, seed_summary, sweep_summary
from .seed_summary import Configuration, History
from .sweep_child import Child


@dataclass(frozen=True)
class Report:
    files: list[Path]
    configs: list[Configuration] = field(default_factory=list)
    heatmaps: list[Path] = field(default_factory=list)
    top: Child | None = None


def write(
    children: Sequence[Child],
    swept_keys: Sequence[str],
    objective: str,
    mode: str,
    folder: Path,
    *,
    history: Callable[[str], History],
    also: Sequence[str] = (),
    title: str = "",
    links: Mapping[str, str] | None = None,
    address: str = "",
    grid_plots: bool = True,
    labels: Mapping[str, str] | None = None,
    label_settings: int | None = None,
    leading: Sequence[str] = (),
    kind: str = "Sweep summary",
) -> Report:
    """Write the summary of `children` into `folder`; `history(run_id)`, a run's objective as it
    logged it (read only for the runs of configurations repeated over seeds). `grid_plots=False`
    leaves out the objective's plot and the heat maps (an Optuna study's trials sit anywhere in a
    continuous space: its own plots show them). `labels` name the keys in a configuration's label,
    of which it shows `label_settings` at most, `leading` first (see seed_summary.configurations)."""
    configs = (
        seed_summary.configurations(
            children, swept_keys, mode, labels=labels, most_settings=label_settings, leading=leading
        )
        if seed_summary.seeded(children, swept_keys)
        else []
    )
    images: list[Path] = []
    if configs:
        histories = {r.run_id: history(r.run_id) for c in configs for r in c.runs}
        images += seed_plots.plot(configs, histories, objective, mode, folder)
    plot = sweep_summary.plot_objective(children, swept_keys, objective, folder) if grid_plots else None
    heatmaps = (
        sweep_summary.plot_heatmaps(children, swept_keys, objective, folder, also) if grid_plots else []
    )
    images += [*([plot] if plot else []), *heatmaps]
    files = sweep_summary.write_table(
        children,
        swept_keys,
        objective,
        folder,
        also,
        mode=mode,
        title=title,
        links=links,
        address=address,
        configs=configs,
        images=images,
        kind=kind,
    )
    return Report([*files, *images], configs, heatmaps, sweep_summary.best(children, mode))
