"""Optuna's plots on a sweep's parent run, read as a person reads them: each parameter by a short
name, the objective by its metric's name, trials in whole numbers, no text on top of another.
The figures are read before they are saved (matplotlib objects), the page's plots as plotly figures."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import optuna
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from hydra_plugins.framework_optuna_sweeper._axes import axis_labels, log_ticks
from hydra_plugins.framework_optuna_sweeper._plots import (
    PLOTS_HTML,
    interactive_figures,
    relabelled,
    static_figures,
    write,
)

matplotlib.use("Agg")
OBJECTIVE = "eval/return_mean"
KEYS = ("agent.hyperparams.gamma", "agent.hyperparams.learning_rate", "agent.hyperparams.n_epochs")
DISTRIBUTIONS = {
    "agent.hyperparams.gamma": CategoricalDistribution([0.95, 0.98, 0.99]),
    "agent.hyperparams.learning_rate": FloatDistribution(1e-4, 1e-2, log=True),
    "agent.hyperparams.n_epochs": IntDistribution(3, 10),
}


def _study(trials: int, failed: tuple[int, ...] = ()) -> optuna.Study:
    """A study as a sweep leaves it: `trials` trials over three PPO keys, those in `failed` FAIL."""
    study = optuna.create_study(study_name="ppo-cartpole", direction="maximize")
    for number in range(trials):
        learning_rate = 1e-4 * 100 ** ((number * 0.37) % 1.0)
        params = {
            "agent.hyperparams.gamma": (0.95, 0.98, 0.99)[number % 3],
            "agent.hyperparams.learning_rate": learning_rate,
            "agent.hyperparams.n_epochs": 3 + (number * 5) % 8,
        }
        value = (
            500 - 60 * abs(math.log10(learning_rate) + 3) - 7 * abs(params["agent.hyperparams.n_epochs"] - 6)
        )
        study.add_trial(
            optuna.trial.create_trial(
                state=TrialState.FAIL if number in failed else TrialState.COMPLETE,
                value=None if number in failed else value,
                params=params,
                distributions=DISTRIBUTIONS,
            )
        )
    return study


@pytest.fixture(scope="module")
def figures() -> Iterator[dict[str, Figure]]:
    import matplotlib.pyplot as plt

    drawn = dict(static_figures(relabelled(_study(8)), OBJECTIVE))
    for figure in drawn.values():
        figure.canvas.draw()
    yield drawn
    for figure in drawn.values():
        plt.close(figure)


def test_a_parameter_is_named_by_the_last_part_of_its_key_unless_another_key_ends_the_same() -> None:
    assert axis_labels([*KEYS, "env.gamma", "seed"]) == {
        "agent.hyperparams.gamma": "hyperparams.gamma",
        "agent.hyperparams.learning_rate": "learning_rate",
        "agent.hyperparams.n_epochs": "n_epochs",
        "env.gamma": "env.gamma",
        "seed": "seed",
    }


def test_the_plotted_study_keeps_every_trial_and_its_number() -> None:
    study = _study(5, failed=(1,))
    shown = relabelled(study)
    assert [t.number for t in shown.trials] == [0, 1, 2, 3, 4]
    assert [t.state for t in shown.trials] == [t.state for t in study.trials]
    assert shown.trials[3].params == {
        "gamma": 0.95,
        "learning_rate": study.trials[3].params["agent.hyperparams.learning_rate"],
        "n_epochs": 10,
    }


def test_the_parallel_coordinates_name_the_objective_and_each_parameter_shortly(
    figures: dict[str, Figure],
) -> None:
    axes = figures["parallel_coordinate"].axes[0]
    assert [t.get_text() for t in axes.get_xticklabels()] == [OBJECTIVE, "gamma", "learning_rate", "n_epochs"]
    assert OBJECTIVE in axes.get_title()
    # The learning rate's log axis: plain numbers, not 10 to a power at every minor tick.
    shown = [t.get_text() for ax in figures["parallel_coordinate"].axes for t in ax.get_yticklabels()]
    assert "0.001" in shown and not any("times" in text or "^" in text for text in shown), shown
    # n_epochs (an integer) is read in whole epochs, never at 4.5; gamma (categorical) at its values.
    epochs = figures["parallel_coordinate"].axes[-1]
    assert all(float(tick).is_integer() for tick in epochs.get_yticks()), epochs.get_yticks()
    # The worst trial's line shows on the white ground (Optuna's Blues starts nearly white).
    from matplotlib.collections import LineCollection

    (lines,) = [c for c in axes.collections if isinstance(c, LineCollection)]
    assert max(sum(lines.get_cmap()(end)[:3]) / 3 for end in (0.0, 1.0)) < 0.8


@pytest.mark.parametrize("trials", [1, 2, 8])
def test_the_history_counts_trials_in_whole_numbers_and_names_the_objective(trials: int) -> None:
    import matplotlib.pyplot as plt

    drawn = dict(static_figures(relabelled(_study(trials)), OBJECTIVE))
    figure = drawn["optimization_history"]
    try:
        figure.canvas.draw()
        axes = figure.axes[0]
        low, high = axes.get_xlim()
        ticks = [tick for tick in axes.get_xticks() if low <= tick <= high]
        assert ticks and all(float(tick).is_integer() for tick in ticks), ticks
        assert axes.get_ylabel() == OBJECTIVE
        assert OBJECTIVE in axes.get_title() and "maximize" in axes.get_title()
    finally:
        for each in drawn.values():
            plt.close(each)


def test_the_slice_names_the_objective_and_its_trial_colours_are_whole_numbers(
    figures: dict[str, Figure],
) -> None:
    figure = figures["slice"]
    slices = [ax for ax in figure.axes if ax.get_xlabel()]
    assert [ax.get_xlabel() for ax in slices] == ["gamma", "learning_rate", "n_epochs"]
    assert slices[0].get_ylabel() == OBJECTIVE
    assert figure.get_suptitle() == f"{OBJECTIVE} by each parameter's value"
    (colorbar,) = [ax for ax in figure.axes if ax.get_ylabel() == "Trial"]
    low, high = colorbar.get_ylim()
    assert all(float(t).is_integer() for t in colorbar.get_yticks() if low <= t <= high)


@pytest.mark.parametrize(
    "stem", ["optimization_history", "param_importances", "parallel_coordinate", "slice"]
)
def test_no_two_texts_of_a_plot_overlap(figures: dict[str, Figure], stem: str) -> None:
    overlapping = _overlapping_texts(figures[stem])
    assert not overlapping, overlapping


def test_slices_of_many_parameters_wrap_into_rows_of_three() -> None:
    import matplotlib.pyplot as plt

    study = optuna.create_study(direction="minimize")
    names = [f"agent.hyperparams.{name}" for name in ("a_rate", "b_coef", "c_norm", "d_size", "e_steps")]
    for number in range(6):
        study.add_trial(
            optuna.trial.create_trial(
                value=float(number),
                params={name: 1e-5 * 10 ** (number * 0.7 + i) for i, name in enumerate(names)},
                distributions={name: FloatDistribution(1e-6, 1e3, log=True) for name in names},
            )
        )
    (figure,) = [f for stem, f in static_figures(relabelled(study), "loss/td") if stem == "slice"]
    try:
        figure.canvas.draw()
        width, height = figure.get_size_inches()
        assert width < 12 < height * 2, (width, height)  # two rows of three, not one row of five
        assert not _overlapping_texts(figure)
    finally:
        plt.close(figure)
    # The page's slices too: Optuna makes five 1,500 px wide, scrolled sideways in a 1,400 px window.
    layout = dict(interactive_figures(relabelled(study), "loss/td"))["slice"].layout
    assert layout.width is None
    rows = {tuple(layout[f"yaxis{n}"].domain) for n in ("", "2", "3", "4", "5")}
    columns = {tuple(layout[f"xaxis{n}"].domain) for n in ("", "2", "3", "4", "5")}
    assert len(rows) == 2 and len(columns) == 3, (rows, columns)
    assert [layout[f"yaxis{n}"].title.text for n in ("", "4")] == ["loss/td", "loss/td"]


def test_the_page_holds_the_same_names_interactive(tmp_path: Path) -> None:
    study = relabelled(_study(8))
    pages = dict(interactive_figures(study, OBJECTIVE))
    history = pages["optimization_history"].layout
    assert history.yaxis.title.text == OBJECTIVE and history.xaxis.dtick == 1
    assert list(pages["parallel_coordinate"].layout.xaxis.ticktext) == [
        OBJECTIVE,
        "gamma",
        "learning_rate",
        "n_epochs",
    ]
    slice_layout = pages["slice"].layout
    assert [slice_layout[f"xaxis{n}"].title.text for n in ("", "2", "3")] == [
        "gamma",
        "learning_rate",
        "n_epochs",
    ]
    assert slice_layout.yaxis.title.text == OBJECTIVE
    assert "0.001" in slice_layout.xaxis2.ticktext

    assert write(_study(8), tmp_path, OBJECTIVE) == list(pages)
    page = (tmp_path / PLOTS_HTML).read_text()
    assert "ppo-cartpole: eval/return_mean (maximize)" in page and "agent.hyperparams" not in page
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(f"{stem}.png" for stem in pages)


def test_a_log_axis_is_labelled_by_a_few_round_numbers() -> None:
    assert log_ticks(1.6e-4, 5e-3) == [2e-4, 5e-4, 1e-3, 2e-3, 5e-3]
    assert log_ticks(1e-6, 1e-1) == [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
    assert len(log_ticks(1e-12, 1e3)) <= 8
    # A span without a round number in it: its ends, to two digits.
    assert log_ticks(2.34e-4, 3.1e-4) == [2.4e-4, 3.1e-4]


def _overlapping_texts(figure: Figure) -> list[tuple[str, str]]:
    """Pairs of drawn, non-empty texts whose boxes on the rendered figure intersect."""
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    hidden = _ticks_out_of_view(figure)
    texts = [
        t
        for t in figure.findobj(Text)
        if isinstance(t, Text) and t.get_visible() and t.get_text().strip() and id(t) not in hidden
    ]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]


def _ticks_out_of_view(figure: Figure) -> set[int]:
    """The labels of ticks outside their axis's view: matplotlib keeps them, but does not draw them."""
    hidden: set[int] = set()
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * max(abs(low), abs(high))
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                if not low - slack <= tick.get_loc() <= high + slack:
                    hidden.update((id(tick.label1), id(tick.label2)))
    return hidden
