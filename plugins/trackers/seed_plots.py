"""The plots of configurations over seeds (seed_summary): learning curves as IQM with a band,
performance profiles, and the probability that each configuration improves on the leader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import seed_stats as ss
from .seed_summary import CURVES_PNG, IMPROVEMENT_PNG, PROFILE_PNG, leader

if TYPE_CHECKING:
    from .seed_summary import Configuration, History


def plot(
    found: Sequence[Configuration],
    histories: Mapping[str, History],
    objective: str,
    mode: str,
    folder: Path,
) -> list[Path]:
    """The curves (IQM over seeds with its band, per configuration), the performance profiles and,
    for several configurations, the probabilities of improvement; `histories[run_id]`: each run's
    objective as it logged it."""
    if not found:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    paths = []
    colours = [f"C{i % 10}" for i in range(len(found))]
    fig, ax = plt.subplots(figsize=(7.5 if len(found) <= 3 else 10.0, 4.4), dpi=110)
    for config, colour in zip(found, colours, strict=True):
        c = ss.curve([histories[r.run_id] for r in config.runs if r.run_id in histories])
        if len(c.steps) > 1:
            ax.plot(c.steps, c.value, color=colour, label=_legend_label(config))
            ax.fill_between(c.steps, c.low, c.high, color=colour, alpha=0.2, linewidth=0)
        elif len(c.steps) and config.n < 2:  # one evaluation of one run: a point, no interval
            ax.plot(c.steps, c.value, "o", color=colour, label=_legend_label(config))
        elif len(c.steps):  # one evaluation each: a point and its interval, which a line would hide
            ax.errorbar(
                c.steps, c.value, yerr=[c.value - c.low, c.high - c.value], fmt="o", color=colour,
                capsize=4, label=_legend_label(config),
            )  # fmt: skip
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"{objective} (IQM over seeds)")
    ax.set_title(f"{objective}: IQM over seeds, 95 % interval shaded")
    ax.grid(alpha=0.3)
    _legend(ax)
    paths.append(save(fig, folder / CURVES_PNG))

    every = np.concatenate([np.asarray(c.scores) for c in found])
    low, high = float(every.min()), float(every.max())
    pad = 0.05 * (high - low) or 1.0
    taus = np.linspace(low - pad, high + pad, 101)
    fig, ax = plt.subplots(figsize=(7.5 if len(found) <= 3 else 10.0, 4.4), dpi=110)
    for config, colour in zip(found, colours, strict=True):
        p = ss.profile(config.scores, taus, mode=mode)
        ax.plot(taus, p.fraction, color=colour, label=_legend_label(config))
        ax.fill_between(taus, p.low, p.high, color=colour, alpha=0.15, linewidth=0)
    side = ">" if mode == "max" else "<"
    ax.set_xlabel(f"{objective} (τ)")
    ax.set_ylabel(f"fraction of runs with {objective} {side} τ")
    ax.set_title("Performance profile over seeds (95 % band)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    _legend(ax)
    paths.append(save(fig, folder / PROFILE_PNG))

    # The configurations run over seeds (a single run gives no chance to draw), each in its colour.
    compared = [(config, colour) for config, colour in zip(found, colours, strict=True) if config.improvement]
    if len(compared) > 1:
        rows = max(_wrapped(c.label, 40).count("\n") + 1 for c, _ in compared)
        fig, ax = plt.subplots(figsize=(7.5, 1.2 + (0.3 + 0.15 * rows) * len(compared)), dpi=110)
        names = []
        for i, (config, colour) in enumerate(compared):
            chance = config.improvement
            assert chance is not None
            ax.errorbar(
                [chance.value], [i], xerr=[[chance.value - chance.low], [chance.high - chance.value]],
                fmt="o", color=colour, capsize=4,
            )  # fmt: skip
            names.append(_wrapped(config.label, 40))
        ax.axvline(0.5, color="grey", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(compared)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(-0.04, 1.04)  # a point at 0 or 1 drawn whole
        ax.set_xlabel(f"P(a run of it beats a run of the other) on {objective}")
        best = _short_label(leader(found).label, 34)
        ax.set_title(
            "Probability of improving on the best other configuration (95 % interval)\n"
            f"the other: the leader, {best}; for the leader, the next best",
            fontsize=10,
        )
        ax.grid(alpha=0.3, axis="x")
        paths.append(save(fig, folder / IMPROVEMENT_PNG))
    return paths


def _legend(ax: object) -> None:
    """Beside the plot, where it hides no curve and no band."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # type: ignore[attr-defined]


def save(fig: object, path: Path) -> Path:
    """Write a figure to `path` and close it: laid out tight, its image grown to hold a legend
    beside the axes or long tick labels (where the tight layout cannot make room, quietly: the
    image holds them all the same)."""
    import warnings

    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Tight layout not applied", category=UserWarning)
        fig.tight_layout()  # type: ignore[attr-defined]
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15)  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    return path


def _short_label(label: str, width: int = 28) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _legend_label(config: Configuration, width: int = 34) -> str:
    """A configuration's label in the legend, its number of seeds after it (`_wrapped`)."""
    return f"{_wrapped(config.label, width)} (n={config.n})"


def _wrapped(label: str, width: int) -> str:
    """A label whole, in lines of `width` (cut short, two labels that differ only at their end
    would look alike)."""
    import textwrap

    lines = textwrap.wrap(label, width, break_long_words=False, break_on_hyphens=False) or [label]
    return "\n".join([*lines[:3], *(["…"] if len(lines) > 3 else [])])
