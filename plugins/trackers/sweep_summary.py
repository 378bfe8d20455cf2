"""A sweep's summary for its parent run: a table of every child and the objective across the swept values."""

from __future__ import annotations

import csv
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE_CSV = "sweep_summary.csv"
TABLE_HTML = "sweep_summary.html"
PLOT_PNG = "objective.png"
SEED = "seed"


@dataclass(frozen=True)
class Child:
    """One job of the sweep, as its run records it."""

    run_id: str
    name: str
    status: str
    duration_s: float | None
    params: dict[str, str]
    objective: float | None


def child_from_run(run: Any, swept_keys: Sequence[str], objective: str) -> Child:
    info, data = run.info, run.data
    duration = (info.end_time - info.start_time) / 1000 if info.end_time and info.start_time else None
    value = data.metrics.get(objective)
    return Child(
        run_id=str(info.run_id),
        name=str(info.run_name),
        status=str(info.status),
        duration_s=duration,
        params={key: str(data.params.get(key, "")) for key in swept_keys},
        objective=None if value is None or math.isnan(value) else float(value),
    )


def best(children: Sequence[Child], mode: str) -> Child | None:
    scored = [c for c in children if c.objective is not None and c.status == "FINISHED"]
    if not scored:
        return None
    sign = 1.0 if mode == "max" else -1.0
    return max(scored, key=lambda c: sign * (c.objective or 0.0))


def write_table(
    children: Sequence[Child], swept_keys: Sequence[str], objective: str, folder: Path
) -> list[Path]:
    """The children as CSV and as an HTML table (which the MLflow UI shows in its artifact view)."""
    header = ["run", "run_id", *swept_keys, objective, "status", "duration_s"]
    rows = [
        [
            c.name,
            c.run_id,
            *(c.params[k] for k in swept_keys),
            "" if c.objective is None else f"{c.objective:.6g}",
            c.status,
            "" if c.duration_s is None else f"{c.duration_s:.1f}",
        ]
        for c in children
    ]
    with open(folder / TABLE_CSV, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    (folder / TABLE_HTML).write_text(
        "<!doctype html><meta charset='utf-8'><style>table{border-collapse:collapse;font:13px sans-serif}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}</style>"
        f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>",
        encoding="utf-8",
    )
    return [folder / TABLE_CSV, folder / TABLE_HTML]


def plot_objective(
    children: Sequence[Child], swept_keys: Sequence[str], objective: str, folder: Path
) -> Path | None:
    """The objective against the first swept setting, one line per combination of the others.

    Seeds are replicates, not settings: a swept `seed` is averaged over (bars: the lowest and the
    highest run), unless it is the only key swept.
    """
    scored = [c for c in children if c.objective is not None]
    if not scored or not swept_keys:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = [k for k in swept_keys if k != SEED] or list(swept_keys)
    x_key, group_keys = settings[0], settings[1:]
    groups: dict[str, list[Child]] = {}
    for c in scored:
        label = " ".join(f"{k.rsplit('.', 1)[-1]}={c.params[k]}" for k in group_keys)
        groups.setdefault(label, []).append(c)
    xs = _ordered({c.params[x_key] for c in scored})
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for label, members in sorted(groups.items()):
        by_x: dict[str, list[float]] = {}
        for c in members:
            by_x.setdefault(c.params[x_key], []).append(float(c.objective or 0.0))
        points = sorted((xs.index(x), sum(v) / len(v), min(v), max(v)) for x, v in by_x.items())
        x, mean = [p[0] for p in points], [p[1] for p in points]
        spread = [[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]]
        ax.errorbar(x, mean, yerr=spread, marker="o", capsize=3, label=label or objective)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_xlabel(x_key)
    ax.set_ylabel(objective)
    n_seeds = len({c.params[SEED] for c in scored}) if SEED in swept_keys and x_key != SEED else 0
    seeds = f", mean over {n_seeds} seeds" if n_seeds else ""
    ax.set_title(f"{objective} across the sweep ({len(scored)} runs{seeds})")
    ax.grid(alpha=0.3)
    if group_keys:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = folder / PLOT_PNG
    fig.savefig(path)
    plt.close(fig)
    return path


def note(
    children: Sequence[Child], top: Child | None, objective: str, mode: str, links: Mapping[str, str]
) -> str:
    """The parent run's description (markdown): the best child, linked, and the count by status."""
    counts: dict[str, int] = {}
    for c in children:
        counts[c.status] = counts.get(c.status, 0) + 1
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = [f"Sweep of {len(children)} runs ({statuses}); objective: {objective} ({mode})."]
    if top is not None:
        lines.append(f"Best: [{top.name}]({links[top.run_id]}) with {objective} = {top.objective:.6g}.")
    lines.append(f"Every child: artifacts {TABLE_HTML} and {TABLE_CSV}; the objective: {PLOT_PNG}.")
    return "\n\n".join(lines)


def _ordered(values: set[str]) -> list[str]:
    """Swept values in numeric order when they are numbers, else in text order."""
    try:
        return sorted(values, key=float)
    except ValueError:
        return sorted(values)
