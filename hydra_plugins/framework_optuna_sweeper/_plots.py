"""Optuna's plots of a sweep's study, for its parent run: each a PNG, all of them in one interactive page.

Optuna draws them; this module makes them readable where they are opened. A parameter is shown by
the last part of its key (`learning_rate`; `env.gamma` beside `agent.gamma`), the value by the
objective's name (`eval/return_mean`), trials by whole numbers, and no text on top of another: a
log axis is labelled by a few plain numbers, each slice has the width of its labels, and the
parallel coordinates one column per parameter.
"""

from __future__ import annotations

import html
import logging
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from plotly.graph_objects import Figure as PlotlyFigure

from ._axes import axis_labels, plain_log_ticks, plain_plotly_log_ticks, whole

log = logging.getLogger("framework")

#: The page that holds every plot, interactive.
PLOTS_HTML = "plots.html"
#: File stem → the function's name (in optuna.visualization and optuna.visualization.matplotlib
#: alike), and the fewest finished trials it needs.
PLOTS = {
    "optimization_history": ("plot_optimization_history", 1),
    "param_importances": ("plot_param_importances", 2),
    "parallel_coordinate": ("plot_parallel_coordinate", 1),
    "slice": ("plot_slice", 1),
}
#: Inches per slice and per parallel coordinate: room for a parameter's name and its tick labels.
SLICE_WIDTH_IN = 3.4
COLUMN_WIDTH_IN = 2.0
#: Slices side by side, at most; more go on further rows.
SLICE_COLUMNS = 3
#: A figure's height, in inches (matplotlib's default).
HEIGHT_IN = 4.8


def write(study: optuna.Study, folder: Path, objective: str) -> list[str]:
    """Each plot the study's finished trials allow as `<stem>.png` in `folder`, and all of them in
    PLOTS_HTML; the stems written. A plot Optuna cannot draw is left out, with a warning."""
    import matplotlib.pyplot as plt

    try:
        shown = relabelled(study)
    except Exception as e:  # the plots, then, with the keys as Optuna names them
        log.warning("Optuna's plots keep the whole parameter keys: %s", e)
        shown = study
    written: list[str] = []
    sections: list[str] = []
    for stem, figure in static_figures(shown, objective):
        try:
            _save(figure, folder / f"{stem}.png")
            written.append(stem)
        except Exception as e:  # a plot is never worth the sweep's summary
            log.warning("Optuna's %s plot is left out: %s", stem, e)
        finally:
            plt.close(figure)
    for stem, page in interactive_figures(shown, objective):
        # plotly.js once, in the first plot: the page works offline, in MLflow's artifact view too.
        sections.append(page.to_html(full_html=False, include_plotlyjs=not sections, div_id=stem))
    if sections:
        title = html.escape(f"Optuna study {study.study_name}: {objective} ({_direction(study)})")
        (folder / PLOTS_HTML).write_text(
            f"<!doctype html><meta charset='utf-8'><title>{title}</title>"
            # The scrollbar there from the start: plotly sizes each plot to the width it first finds.
            f"<style>html{{overflow-y:scroll}} body{{font-family:sans-serif}}</style>"
            f"<body><h1>{title}</h1>{''.join(sections)}</body>",
            encoding="utf-8",
        )
    return written


def _save(figure: Figure, path: Path) -> None:
    """Save a plot; where the constrained layout cannot place its axes (a colour bar Optuna added
    beside a single slice of a few trials), as Optuna placed them."""
    try:
        figure.savefig(path, dpi=110, bbox_inches="tight")
    except ZeroDivisionError:
        figure.set_layout_engine("none")
        figure.savefig(path, dpi=110, bbox_inches="tight")


def relabelled(study: optuna.Study) -> optuna.Study:
    """The study in memory with each parameter named by its short label: Optuna's plots name a
    parameter by its key, which `agent.hyperparams.` alone fills. Every trial is kept, in order, so
    trial numbers stay those of the runs' names."""
    import optuna

    trials = study.get_trials(deepcopy=False)
    keys = sorted({key for t in trials for key in t.params})
    short = axis_labels(keys)
    said = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # "A new study created in memory" is ours
    try:
        copy = optuna.create_study(study_name=study.study_name, direction=study.direction)
    finally:
        optuna.logging.set_verbosity(said)
    copy.add_trials(
        optuna.trial.create_trial(
            state=t.state,
            values=t.values,
            params={short[k]: v for k, v in t.params.items()},
            distributions={short[k]: d for k, d in t.distributions.items()},
            user_attrs=t.user_attrs,
            intermediate_values=t.intermediate_values,
        )
        for t in trials
    )
    return copy


def static_figures(study: optuna.Study, objective: str) -> Iterator[tuple[str, Figure]]:
    """Each plot as a matplotlib figure, laid out and labelled, not yet saved (the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import optuna.visualization.matplotlib as static

    finished = _finished(study)
    for stem, (function, needs) in PLOTS.items():
        if finished < needs:
            continue
        # Optuna's style sheet (ggplot) stays with its plots, not with the rest of the process.
        with _quiet(), matplotlib.rc_context():
            try:
                axes = getattr(static, function)(study, target_name=objective)
                figure = _FIXES[stem](axes, objective, study)
            except Exception as e:  # a plot Optuna cannot draw from these trials (one value only, say)
                log.warning("Optuna's %s plot was not drawn: %s", stem, e)
                continue
        yield stem, figure


def interactive_figures(study: optuna.Study, objective: str) -> Iterator[tuple[str, PlotlyFigure]]:
    """Each plot as a plotly figure, with the same titles and axes as its PNG."""
    import optuna.visualization as interactive

    finished = _finished(study)
    for stem, (function, needs) in PLOTS.items():
        if finished < needs:
            continue
        with _quiet():
            try:
                figure = getattr(interactive, function)(study, target_name=objective)
            except Exception as e:
                log.warning("Optuna's interactive %s plot was not drawn: %s", stem, e)
                continue
        figure.update_layout(title_text=_title(stem, objective, study))
        if stem == "optimization_history":
            trials = len(study.get_trials(deepcopy=False))
            figure.update_xaxes(title_text="trial", tick0=0, dtick=max(1, math.ceil(trials / 15)))
            figure.update_yaxes(title_text=objective)
        elif stem == "param_importances":
            figure.update_layout(showlegend=False)
            figure.update_xaxes(title_text=f"importance for {objective}")
            figure.update_yaxes(title_text="")
        elif stem == "parallel_coordinate":
            names = _param_names(study)
            figure.update_xaxes(ticktext=[whole(t, names) for t in figure.layout.xaxis.ticktext or ()])
        elif stem == "slice":
            _plotly_slice_rows(figure, objective)
            plain_plotly_log_ticks(figure)
        yield stem, figure


def _plotly_slice_rows(figure: PlotlyFigure, objective: str) -> None:
    """The slices in rows of SLICE_COLUMNS, as in the PNG: Optuna gives more than three a row
    300 px each, wider than the page (1,800 px for six) and scrolled sideways."""
    count = sum(1 for name in figure.layout if name.startswith("xaxis"))
    columns = min(count, SLICE_COLUMNS)
    rows = math.ceil(count / columns)
    for i in range(count):
        row, column = divmod(i, columns)
        suffix = str(i + 1) if i else ""
        figure.layout[f"xaxis{suffix}"].domain = (column / columns + 0.03, (column + 1) / columns - 0.03)
        top = 1 - row / rows
        figure.layout[f"yaxis{suffix}"].update(
            domain=(top - 1 / rows + (0.18 / rows if rows > 1 else 0), top),
            showticklabels=column == 0,
            title_text=objective if column == 0 else None,
        )
    if count > 1:
        figure.layout.width = None
        figure.layout.height = 450 + 380 * (rows - 1)


def _title(stem: str, objective: str, study: optuna.Study) -> str:
    return {
        "optimization_history": f"{objective} by trial ({_direction(study)})",
        "param_importances": f"Importance of each parameter for {objective}",
        "parallel_coordinate": f"{objective} and the parameters of each trial",
        "slice": f"{objective} by each parameter's value",
    }[stem]


def _history(axes: Axes, objective: str, study: optuna.Study) -> Figure:
    from matplotlib.ticker import MaxNLocator

    axes.set_title(_title("optimization_history", objective, study))
    axes.set_xlabel("trial")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    return _figure(axes)


def _importances(axes: Axes, objective: str, study: optuna.Study) -> Figure:
    axes.set_title(_title("param_importances", objective, study), loc="left")
    axes.set_xlabel(f"importance for {objective}")
    axes.set_ylabel("")
    legend = axes.get_legend()
    if legend is not None:  # one objective: the title names it
        legend.remove()
    figure = _figure(axes)
    figure.set_layout_engine("tight")
    return figure


def _parallel(axes: Axes, objective: str, study: optuna.Study) -> Figure:
    figure = _figure(axes)
    columns = len(axes.get_xticks())
    figure.set_size_inches(max(6.4, COLUMN_WIDTH_IN * columns + 1.5), HEIGHT_IN)
    axes.set_title(_title("parallel_coordinate", objective, study), y=1.03)
    from matplotlib.collections import LineCollection
    from matplotlib.ticker import MaxNLocator
    from optuna.distributions import IntDistribution

    names = _param_names(study)
    ticks = [whole(label.get_text(), names) for label in axes.get_xticklabels()]
    axes.set_xticks(axes.get_xticks(), ticks, rotation=0, horizontalalignment="center")
    for lines in axes.collections:
        if isinstance(lines, LineCollection) and lines.get_array() is not None:
            _without_white(lines)  # the worst trial's line would vanish on the white ground
    integers = {
        name
        for t in study.get_trials(deepcopy=False)
        for name, d in t.distributions.items()
        if isinstance(d, IntDistribution)
    }
    # Optuna makes a twin axis per parameter, in the order of the columns after the objective's.
    params = [label.get_text() for label in axes.get_xticklabels()][1:]
    twins = [t for t in figure.axes if t is not axes and t not in _colorbar_axes(figure)]
    for twin, param in zip(twins, params, strict=False):
        if twin.get_yscale() == "log":
            plain_log_ticks(twin.yaxis)
        elif param in integers:
            twin.yaxis.set_major_locator(MaxNLocator(integer=True))  # no epochs at 4.5
        # A column's tick labels lie on the lines that cross it: on a light ground, they stay legible.
        for label in twin.get_yticklabels():
            label.set_bbox({"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 1})
    for ax in [axes, *twins]:  # the best and the worst trial's lines drawn whole, off the frame
        _with_margin(ax, 0.04)
    return figure


def _without_white(collection: Any) -> None:
    """A collection coloured by Optuna's Blues (Blues_r minimising), less that map's near-white end
    (its first 40 %): the points and lines it colours show on a white or grey ground."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    blues = collection.get_cmap()
    light_first = sum(blues(0.0)[:3]) > sum(blues(1.0)[:3])
    span = np.linspace(0.4, 1.0, 256) if light_first else np.linspace(0.0, 0.6, 256)
    collection.set_cmap(ListedColormap(blues(span), name=f"{blues.name}_shown"))


def _with_margin(ax: Axes, fraction: float) -> None:
    """`ax`'s y range grown by `fraction` at each end (in log space on a log axis), so that every
    axis of a parallel-coordinate plot keeps its place against the others."""
    low, high = ax.get_ylim()
    if ax.get_yscale() == "log":
        a, b = math.log10(low), math.log10(high)
        ax.set_ylim(10 ** (a - fraction * (b - a)), 10 ** (b + fraction * (b - a)))
    else:
        ax.set_ylim(low - fraction * (high - low), high + fraction * (high - low))


def _slice(axes: Axes | Any, objective: str, study: optuna.Study) -> Figure:
    from matplotlib.category import UnitData
    from matplotlib.gridspec import GridSpec
    from matplotlib.ticker import MaxNLocator

    subplots = list(axes.flat) if hasattr(axes, "flat") else [axes]
    figure = _figure(subplots[0])
    # Optuna puts every slice in one row: past SLICE_COLUMNS, rows of them, so that a browser that
    # fits the image to its width still shows legible text.
    columns = min(len(subplots), SLICE_COLUMNS)
    rows = math.ceil(len(subplots) / columns)
    figure.set_size_inches(max(6.4, SLICE_WIDTH_IN * columns + 1.2), HEIGHT_IN * (1 + 0.8 * (rows - 1)))
    grid = GridSpec(rows, columns, figure=figure)
    for i, ax in enumerate(subplots):
        ax.set_subplotspec(grid[i // columns, i % columns])
        first = i % columns == 0  # Optuna shows the value's ticks and name on the first slice only
        ax.tick_params(axis="y", labelleft=first)
        ax.set_ylabel(objective if first else "")
        if ax.get_xscale() == "log":
            plain_log_ticks(ax.xaxis)
        elif isinstance(ax.xaxis.get_units(), UnitData):  # categories: Optuna writes each as repr()
            ax.set_xticks(ax.get_xticks(), [t.get_text().strip("'") for t in ax.get_xticklabels()])
        for collection in ax.collections:
            if collection.get_array() is not None:
                _without_white(collection)  # trial 0's point would be white on the grey ground
            if collection.colorbar is not None:  # colour is the trial's number: whole numbers
                collection.colorbar.locator = MaxNLocator(integer=True, min_n_ticks=1)
                collection.colorbar.update_ticks()
    if len(subplots) == 1:
        subplots[0].set_title(_title("slice", objective, study))
    else:
        figure.suptitle(_title("slice", objective, study))
    # Optuna's figure lays its slices out by hand; the constrained layout keeps their labels apart.
    figure.set_layout_engine("constrained")
    return figure


_FIXES: dict[str, Callable[[Any, str, optuna.Study], Figure]] = {
    "optimization_history": _history,
    "param_importances": _importances,
    "parallel_coordinate": _parallel,
    "slice": _slice,
}


def _param_names(study: optuna.Study) -> list[str]:
    return sorted({name for t in study.get_trials(deepcopy=False) for name in t.params})


def _figure(axes: Axes) -> Figure:
    figure = axes.get_figure()
    assert figure is not None
    return figure  # type: ignore[return-value]


def _colorbar_axes(figure: Figure) -> list[Axes]:
    return [c.colorbar.ax for a in figure.axes for c in a.collections if c.colorbar is not None]


def _finished(study: optuna.Study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def _direction(study: optuna.Study) -> str:
    return study.direction.name.lower()


@contextmanager
def _quiet() -> Iterator[None]:
    """Optuna's matplotlib plots are marked experimental, and matplotlib remarks on their axes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        yield
