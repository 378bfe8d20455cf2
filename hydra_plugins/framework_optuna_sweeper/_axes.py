"""The axes of the study's plots: parameter names as short as tell them apart, and log axes with
plain, round ticks (matplotlib's and Plotly's own run into each other)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plotly.graph_objects import Figure as PlotlyFigure


def axis_labels(keys: Sequence[str]) -> dict[str, str]:
    """Each key by its last part (`learning_rate`), or by as many last parts as tell it from the
    other keys (`hyperparams.gamma` beside `env.gamma`). Run names abbreviate further (`lr`); a
    plot has the room to spell the name out, but not the whole key: Optuna's parallel coordinates
    cut a name of 20 characters to 17 and `...`, `agent.hyperparams...` on every axis."""

    def tail(key: str, parts: int) -> str:
        return ".".join(key.split(".")[-parts:])

    def ambiguous(key: str, label: str) -> bool:
        return any(other != key and (other == label or other.endswith(f".{label}")) for other in keys)

    chosen = {}
    for key in keys:
        parts = 1
        while parts <= key.count(".") and ambiguous(key, tail(key, parts)):
            parts += 1
        chosen[key] = tail(key, parts)
    return chosen


def whole(label: str, names: list[str]) -> str:
    """A parameter's name where Optuna cut it to 17 characters and `...` (names of 20 or more)."""
    if not label.endswith("..."):
        return label
    matches = [name for name in names if name.startswith(label[:-3])]
    return matches[0] if len(matches) == 1 else label


def plain_log_ticks(axis: Any) -> None:
    """A log axis labelled 0.0001, 0.0003, 0.001: matplotlib labels a span under a decade with
    every minor tick, each as 10 to a power, and they run into each other."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    axis.set_major_locator(FixedLocator(log_ticks(*axis.get_view_interval())))
    axis.set_major_formatter(FuncFormatter(lambda value, _: number(value)))
    axis.set_minor_formatter(NullFormatter())


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks of a log axis from `low` to `high`: 1, 2, 5 of each decade over a decade or so, 1 and 3
    over three, powers of ten beyond (one in two, one in three, ... past eight decades); a short
    span, its ends."""
    low, high = sorted((low, high))
    if low <= 0 or not math.isfinite(high):
        return []
    decades = math.log10(high / low)
    subs = (1.0, 2.0, 5.0) if decades <= 1.5 else (1.0, 3.0) if decades <= 3 else (1.0,)
    stride = max(1, math.ceil(decades / 8))
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    ticks = (
        float(f"{sub * 10.0**power:.1g}")
        for power in range(first - first % stride, last + 1, stride)
        for sub in subs
    )
    inside = [tick for tick in ticks if low <= tick <= high]
    if len(inside) >= 2:
        return inside
    # A span too short for a round number: its ends, to two digits, rounded inwards.
    digits = 10.0 ** (math.floor(math.log10(low)) - 1)
    ends = (math.ceil(low / digits - 1e-9) * digits, math.floor(high / digits + 1e-9) * digits)
    return sorted({*inside, *(float(f"{end:.2g}") for end in ends)})


def number(value: float) -> str:
    """0.002, 0.0005, 5e-5, 3e5: at most 6 characters, so that neighbours do not touch."""
    if value == 0 or 1e-4 <= abs(value) < 1e5:
        return f"{value:g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def plain_plotly_log_ticks(figure: PlotlyFigure) -> None:
    """The slices' log axes with the PNG's ticks: plotly labels a short span 2, 5, 0.001, 2, 5."""
    spans: dict[str, list[float]] = {}
    for trace in figure.data:
        name = "xaxis" + str(trace.xaxis or "x")[1:]
        if figure.layout[name].type == "log":
            spans.setdefault(name, []).extend(x for x in trace.x or () if isinstance(x, int | float))
    for name, values in spans.items():
        if values:
            ticks = log_ticks(min(values), max(values))
            figure.layout[name].update(tickvals=ticks, ticktext=[number(t) for t in ticks])
