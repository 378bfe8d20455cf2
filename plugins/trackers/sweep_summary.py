"""A sweep's summary for its parent run: a table of every child, the objective across the swept values
and, when two settings are swept, a heat map per summarised metric."""

from __future__ import annotations

import csv
import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import seed_plots, seed_summary, summary_page
from .sweep_child import Child

TABLE_CSV = "sweep_summary.csv"
TABLE_HTML = "sweep_summary.html"
PLOT_PNG = "objective.png"
HEATMAP_PNG = "heatmap_{}.png"
SEED = "seed"
#: The probability of improving on the best other configuration, and its interval's bounds.
P_IMPROVE = ("p_improve", "p_improve_low", "p_improve_high")


def also_metrics(also: Sequence[str], objective: str) -> list[str]:
    """The metrics summarised beside the objective: each once, and not the objective again."""
    return [m for m in dict.fromkeys(also) if m != objective]


def value(child: Child, metric: str, objective: str) -> float | None:
    """The child's last value of `metric`: the objective or one of `objective.also`."""
    return child.objective if metric == objective else child.also.get(metric)


def best(children: Sequence[Child], mode: str) -> Child | None:
    scored = [c for c in children if c.objective is not None and c.finished]
    if not scored:
        return None
    sign = 1.0 if mode == "max" else -1.0
    return max(scored, key=lambda c: sign * (c.objective or 0.0))


def ranked(children: Sequence[Child], mode: str) -> list[Child]:
    """Best first: the finished children by objective, then those that did not finish (or measured
    nothing), in the order they ran."""
    sign = -1.0 if mode == "max" else 1.0
    scored = sorted(
        (c for c in children if c.finished and c.objective is not None),
        key=lambda c: sign * (c.objective or 0.0),
    )
    return scored + [c for c in children if c not in scored]


def write_table(
    children: Sequence[Child],
    swept_keys: Sequence[str],
    objective: str,
    folder: Path,
    also: Sequence[str] = (),
    *,
    mode: str = "max",
    title: str = "",
    links: Mapping[str, str] | None = None,
    address: str = "",
    configs: Sequence[seed_summary.Configuration] = (),
    images: Sequence[Path] = (),
    kind: str = "Sweep summary",
) -> list[Path]:
    """The runs, best first, as CSV and as a page (which the MLflow UI shows in its artifact view):
    a column per swept key, the objective, then a column per metric of `also`; `links`, each run
    id's page (`#/experiments/…`), opened at `address` from a downloaded copy. With `configs` (the
    runs repeat configurations over seeds), a row per configuration first: n, mean, median, IQM and
    its interval, the probability of improving on the best other one; `images`, plots for the page."""
    metrics = [objective, *also_metrics(also, objective)]
    trials = any(c.trial_state for c in children)
    header = [
        "row",
        "run",
        "run_id",
        *swept_keys,
        *metrics,
        "status",
        *(["trial"] if trials else []),
        "duration_s",
    ]
    stats = ["n", "mean", "median", "iqm", "iqm_low", "iqm_high", *P_IMPROVE, "best"] if configs else []
    order = ranked(children, mode)
    rows = [
        [
            "run",
            c.name,
            c.run_id,
            *(c.params[k] for k in swept_keys),
            *(_cell(value(c, m, objective)) for m in metrics),
            "REPEATED" if c.repeated else c.status,
            *([c.trial_state] if trials else []),
            "" if c.duration_s is None else f"{c.duration_s:.1f}",
        ]
        for c in order
    ]
    config_rows = seed_summary.rows(configs)
    with open(folder / TABLE_CSV, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header + stats)
        for config, stat_cells in zip(configs, config_rows, strict=True):
            settings = dict(
                zip(seed_summary.settings_of(swept_keys), (v for _, v in config.settings), strict=True)
            )
            writer.writerow(
                ["configuration", config.label, "", *(settings.get(k, "") for k in swept_keys)]
                + [""] * (len(header) - 3 - len(swept_keys))
                + [stat_cells[k] for k in stats]
            )
        writer.writerows(row + [""] * len(stats) for row in rows)
    top = best(children, mode)
    numeric = {header.index(m) for m in metrics} | {len(header) - 1}
    labels_ = seed_summary.short_labels(swept_keys)
    head = "".join(
        f"<th title='{html.escape(h)}'{' class=n' if i in numeric else ''}>"
        f"{html.escape(labels_.get(h, h))}</th>"
        for i, h in enumerate(header)
        if i
    )
    body = []
    for c, row in zip(order, rows, strict=True):
        cells: list[str] = []
        for i, v in enumerate(row):
            text = html.escape(v)
            if i == 0:
                continue
            if i == 1 and c is top:
                text = f"&#9733; {text}"
            elif i == 2 and links and c.run_id in links:
                text = summary_page.run_link(address, links[c.run_id], v[:8])
            elif i == 2:
                text = text[:8]
            elif 3 <= i < 3 + len(swept_keys) and _shorter(v) != v:  # an Optuna draw: 0.004148466620832118
                text = f"<span title='{text}'>{html.escape(_shorter(v))}</span>"
            cells.append(f"<td{' class=n' if i in numeric else ''}>{text}</td>")
        mark = " class=best" if c is top else (" class=out" if not c.finished or c.objective is None else "")
        body.append(f"<tr{mark}>{''.join(cells)}</tr>")
    counts: dict[str, int] = {}
    for c in children:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    better = "higher" if mode == "max" else "lower"
    found = (
        f"Best run: <b>{html.escape(top.name)}</b>, {html.escape(objective)} = {_cell(top.objective)}."
        if top is not None
        else "No run finished with a value of the objective."
    )
    if top is not None and kind == "Comparison" and not configs:  # one seed each: no best configuration
        found = f"Highest single run: {found[10:-1]}; no configuration ran over seeds, so none is best."
    if unlogged := sum(c.finished and c.objective is None for c in children):
        found += f" {unlogged} finished run{'s' if unlogged > 1 else ''} never logged it: left out."
    sections = [
        f"<p>Objective <b>{html.escape(objective)}</b> ({mode}: {better} is better). "
        f"{len(children)} runs ({statuses}). {found} Runs that did not finish"
        f"{', or that a later run repeats (its settings, its seed),' if 'REPEATED' in counts else ''} are "
        "greyed and left out of the statistics and plots.</p>",
        *([seed_summary.section(configs, objective, links or {}, address)] if configs else []),
        *(summary_page.image(p, p.stem) for p in images),
        "<h2>Runs</h2>" if configs or images else "",
        f"<div class=scroll><table><thead><tr>{head}</tr></thead>",
        f"<tbody>{''.join(body)}</tbody></table></div>",
    ]
    summary_page.write(
        folder / TABLE_HTML,
        heading=f"{kind}{': ' + title if title else ''}",
        sections=sections,
        address=address,
    )
    return [folder / TABLE_CSV, folder / TABLE_HTML]


def _ticks(ax: Any, xs: Sequence[str]) -> None:
    """The x axis's categories, each as the table shows it (4 digits); slanted where many."""
    many = len(xs) > 6
    ax.set_xticks(
        range(len(xs)),
        [_shorter(x) for x in xs],
        rotation=40 if many else 0,
        ha="right" if many else "center",
    )


def _shorter(value: str) -> str:
    """A swept value as the page's table shows it: a number to 4 significant digits (the CSV and the
    cell's tooltip keep it whole), anything else as it is."""
    try:
        number = float(value)
    except ValueError:
        return value
    shown = f"{number:.4g}"
    return shown if len(shown) < len(value) else value


def plot_objective(
    children: Sequence[Child], swept_keys: Sequence[str], objective: str, folder: Path
) -> Path | None:
    """The objective against the first swept setting, one line per combination of the others.

    Seeds are replicates, not settings: a swept `seed` is averaged over (bars: the lowest and the
    highest run), unless it is the only key swept.
    """
    scored = [c for c in children if c.objective is not None and c.finished]
    if not scored or not swept_keys:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = [k for k in swept_keys if k != SEED] or list(swept_keys)
    x_key, group_keys = settings[0], settings[1:]
    named = seed_summary.short_labels(settings)
    groups: dict[str, list[Child]] = {}
    for c in scored:
        label = " ".join(f"{named[k]}={c.params[k]}" for k in group_keys if c.params.get(k))
        groups.setdefault(label, []).append(c)
    xs = _ordered({c.params[x_key] for c in scored})
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    counts: list[int] = []  # runs at each point: its seeds
    for label, members in sorted(groups.items()):
        by_x: dict[str, list[float]] = {}
        for c in members:
            by_x.setdefault(c.params[x_key], []).append(float(c.objective or 0.0))
        counts += [len(v) for v in by_x.values()]
        points = sorted((xs.index(x), sum(v) / len(v), min(v), max(v)) for x, v in by_x.items())
        x, mean = [p[0] for p in points], [p[1] for p in points]
        spread = [[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]]
        ax.errorbar(x, mean, yerr=spread, marker="o", capsize=3, label=label or objective)
    _ticks(ax, xs)
    ax.set_xlabel(named[x_key])
    ax.set_ylabel(objective)
    seeded = SEED in swept_keys and x_key != SEED and max(counts) > 1
    seeds = f", mean over {_seeds_said(counts)} seeds" if seeded else ""
    bars = "; bars: the lowest and the highest run" if seeded else ""
    ax.set_title(f"{objective} across the sweep ({len(scored)} runs{seeds}{bars})", fontsize=10)
    ax.grid(alpha=0.3)
    if group_keys:
        ax.legend(fontsize=8)
    return seed_plots.save(fig, folder / PLOT_PNG)


def _seeds_said(counts: Sequence[int]) -> str:
    """'3', or '3-4' where the points' runs differ in number."""
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low}-{high}"


def heatmap_axes(swept_keys: Sequence[str]) -> tuple[str, str] | None:
    """The (x, y) keys of the heat maps: the two swept settings, when exactly two are (seeds aside)."""
    settings = [k for k in swept_keys if k != SEED]
    return (settings[0], settings[1]) if len(settings) == 2 else None


def heatmap_grid(
    children: Sequence[Child], x_key: str, y_key: str, metric: str, objective: str
) -> tuple[list[str], list[str], list[list[float | None]]]:
    """(x values, y values, rows[y][x]): the metric's mean over the children of each cell (their seeds),
    None where no child of the cell logged it. Values in numeric order when they are numbers."""
    xs = _ordered({c.params[x_key] for c in children})
    ys = _ordered({c.params[y_key] for c in children})
    cells: dict[tuple[str, str], list[float]] = {}
    for c in children:
        v = value(c, metric, objective)
        if v is not None:
            cells.setdefault((c.params[x_key], c.params[y_key]), []).append(v)
    rows = [[_mean(cells.get((x, y))) for x in xs] for y in ys]
    return xs, ys, rows


def plot_heatmaps(
    children: Sequence[Child],
    swept_keys: Sequence[str],
    objective: str,
    folder: Path,
    also: Sequence[str] = (),
) -> list[Path]:
    """A heat map per metric (the objective, then each of `also`) over the two swept settings;
    none unless exactly two settings are swept, and none for a metric no child logged."""
    axes = heatmap_axes(swept_keys)
    if axes is None:
        return []
    children = [c for c in children if c.finished]
    paths = []
    for metric in [objective, *also_metrics(also, objective)]:
        counted = [c for c in children if value(c, metric, objective) is not None]
        if counted:
            cells: dict[tuple[str, str], int] = {}
            for c in counted:
                cell = (c.params[axes[0]], c.params[axes[1]])
                cells[cell] = cells.get(cell, 0) + 1
            many = SEED in swept_keys and max(cells.values()) > 1
            seeds = f", mean over {_seeds_said(list(cells.values()))} seeds" if many else ""
            title = f"{metric} ({len(counted)} runs{seeds})"
            paths.append(_heatmap(children, axes, metric, objective, title, folder))
    return paths


def heatmap_name(metric: str) -> str:
    """`heatmap_perf_sims_per_s.png` for perf/sims_per_s: a file name, whatever the metric's name holds."""
    return HEATMAP_PNG.format(re.sub(r"[^A-Za-z0-9._-]+", "_", metric).strip("_") or "metric")


def _heatmap(
    children: Sequence[Child], axes: tuple[str, str], metric: str, objective: str, title: str, folder: Path
) -> Path:
    """One heat map: a cell per pair of swept values, annotated, grey where no run logged the metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    x_key, y_key = axes
    xs, ys, rows = heatmap_grid(children, x_key, y_key, metric, objective)
    grid = np.ma.masked_invalid(np.array([[np.nan if v is None else v for v in row] for row in rows]))
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#d9d9d9")
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(xs) + 2.8), max(3.6, 0.7 * len(ys) + 2.0)), dpi=110)
    image = ax.imshow(grid, cmap=cmap, origin="lower", aspect="auto")
    fig.colorbar(image, ax=ax, label=metric)
    colours = image.to_rgba(grid)
    for row, y_values in enumerate(rows):
        for col, v in enumerate(y_values):
            if v is None:
                continue
            r, g, b, _ = colours[row, col]
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            ax.text(col, row, _short(v), ha="center", va="center", color=ink, fontsize=9)
    _ticks(ax, xs)
    ax.set_yticks(range(len(ys)), [_shorter(y) for y in ys])
    named = seed_summary.short_labels(axes)
    ax.set_xlabel(named[x_key])
    ax.set_ylabel(named[y_key])
    ax.set_title(title)
    return seed_plots.save(fig, folder / heatmap_name(metric))


def note(
    children: Sequence[Child],
    top: Child | None,
    objective: str,
    mode: str,
    links: Mapping[str, str],
    heatmaps: Sequence[str] = (),
    study: Mapping[str, Any] | None = None,
    configs: Sequence[seed_summary.Configuration] = (),
    files: Sequence[str] = (),
) -> str:
    """The parent run's description (markdown): the best child, linked, the count by status, the
    configurations over seeds (if they repeat), and the artifacts to look at: `files`, the
    summary's own; `study["plots"]`, those its sweeper drew."""
    counts: dict[str, int] = {}
    for c in children:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = [f"Sweep of {len(children)} runs ({statuses}); objective: {objective} ({mode})."]
    if top is not None:
        lines.append(f"Best: [{top.name}]({links[top.run_id]}) with {objective} = {top.objective:.6g}.")
    if study is not None:
        states = ", ".join(f"{n} {s}" for s, n in sorted(study.get("states", {}).items()))
        plots = list(study.get("plots") or ())
        drawn = (
            f": its plots ({', '.join(plots)}) are under optuna/, all of them in optuna/plots.html"
            if plots
            else ": too few trials finished for its plots"
        )
        lines.append(f"Optuna study `{study.get('study_name')}` ({states}) in {study.get('storage')}{drawn}.")
    table = f"The children in a table: artifacts {TABLE_HTML} and {TABLE_CSV}"
    lines.append(table + (f"; the objective across them: {PLOT_PNG}." if PLOT_PNG in files else "."))
    if heatmaps:
        lines.append(f"Heat maps over the two swept settings: {', '.join(heatmaps)}.")
    if configs:
        lines.append(seed_summary.markdown(configs, objective, links))
    return "\n\n".join(lines)


def _cell(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def _short(v: float) -> str:
    """A cell's label: whole numbers from 1000 up (12800, not 1.28e+04), else four significant digits."""
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _mean(values: list[float] | None) -> float | None:
    return sum(values) / len(values) if values else None


def _ordered(values: set[str]) -> list[str]:
    """Swept values in numeric order when they are numbers, else in text order."""
    try:
        return sorted(values, key=float)
    except ValueError:
        return sorted(values)
