"""`python -m framework compare [RUN | PARENT | EXPERIMENT ...] [--metric M]`: any finished runs
(of one sweep, of several, single runs) grouped into configurations by the settings that differ
between them, seeds folded into each configuration's statistics, written as a sweep's summary is:
a page, a CSV and the plots over seeds."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framework.columns import WIDTH, refuse, wrap
from framework.commands import Parser

from . import local_views, report, seed_summary, summary_page
from .run_names import NOT_CONFIG
from .seed_summary import SEED
from .store_checks import store_name
from .sweep_child import Child, child_from_run, value_of
from .sweep_parents import history, run_fragment
from .sweep_summary import TABLE_CSV, TABLE_HTML

PAGE, TABLE = "compare.html", "compare.csv"
#: Runs of an experiment `compare` reads.
MOST_RUNS = 5_000
#: Params that say how a run was run or shown, not what was run nor how its result was measured:
#: never what sets configurations apart (the keys a run's name leaves out, and the agents' logging).
#: Its evaluation's episodes and greediness change the measured result: runs that differ in them differ.
BOOKKEEPING = re.compile(
    rf"^(?!eval\.(?:episodes|deterministic)$)"
    rf"(seed|(?:{'|'.join(NOT_CONFIG)})(?:\..*)?|agent\.log_every_steps|agent\.save_buffer)$"
)
#: The settings a configuration's label names first.
FIRST = ("env.name", "agent.name", "agent.algo")
#: The most settings a label names (the CSV and the page's runs table hold them all).
LABEL_SETTINGS = 6
RUN_ID = re.compile(r"^[0-9a-f]{32}$")
SHORT_ID = re.compile(r"^[0-9a-f]{8,31}$")


def main(argv: list[str]) -> int:
    """Compare runs over seeds: IQM with intervals, curves, profiles, probability of improvement."""
    parser = Parser(
        prog="python -m framework compare",
        description="Compare finished runs by configuration, their seeds folded into statistics "
        "(IQM and its 95 % stratified-bootstrap interval, curves, performance profiles, P(improvement))",
    )
    parser.add_argument(
        "runs", nargs="*", metavar="RUN|EXPERIMENT",
        help="run ids (a sweep's parent stands for its children) or experiment names; default: "
        "the experiment of tracking.experiment",
    )  # fmt: skip
    parser.add_argument("--metric", help="the metric compared (default: the runs' objective.metric)")
    parser.add_argument(
        "--env", metavar="ENV", help="compare the runs of this env only: cartpole, gym:Acrobot-v1, atari:Pong"
    )
    parser.add_argument("--mode", choices=("max", "min"), help="max: higher is better (default: the runs')")
    parser.add_argument("--out", type=Path, help="the folder written (default: outputs/compare/TIME)")
    store = [a for a in argv if a.lstrip("+").startswith(("tracking.", "tracking="))]
    args = parser.parse_args([a for a in argv if a not in store])
    try:
        uri, experiment = _store(store)
        return _compare(uri, experiment, args)
    except (LookupError, ValueError) as e:
        refuse(str(e))
        return 1


def _compare(uri: str, experiment: str, args: argparse.Namespace) -> int:
    from mlflow.tracking import MlflowClient

    from .mlflow_quiet import quiet_libraries

    quiet_libraries()
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).is_file():
        raise LookupError(f"no runs at {uri[len('sqlite:///') :]} yet: nothing to compare")
    client = MlflowClient(tracking_uri=uri)
    if not args.runs and client.get_experiment_by_name(experiment) is None:  # none named: the config's
        names = sorted(e.name for e in client.search_experiments())
        given = "MLFLOW_EXPERIMENT_NAME" if os.environ.get("MLFLOW_EXPERIMENT_NAME") else "its default"
        raise LookupError(
            f"{uri} has no experiment {experiment} (tracking.experiment, {given}); its experiments: "
            f"{', '.join(names) or 'none'}: name one (python -m framework compare NAME), or give runs"
        )
    runs = one_env(_runs(client, args.runs or [experiment]), args.env)
    metric, mode = _objective(runs, args.metric, args.mode)
    keys = differing(runs)
    labels = seed_summary.short_labels(keys)
    runs = sorted(runs, key=lambda r: r.info.start_time or 0)
    columns = [*keys, SEED]  # the seed shown beside the settings, never one of them
    children = counted_once([child_from_run(run, columns, metric) for run in runs], columns)
    if not any(c.finished and c.objective is not None for c in children):
        raise LookupError(_none_finished(runs, metric))
    folder = args.out or Path("outputs") / "compare" / time.strftime("%Y-%m-%d_%H-%M-%S")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LookupError(f"--out {folder}: cannot write there ({e.strerror or e})") from None
    if (folder / PAGE).is_file():  # an earlier comparison's folder: none of its plots outlives it
        for old in folder.glob("*.png"):
            old.unlink(missing_ok=True)
    links = {
        c.run_id: run_fragment(str(r.info.experiment_id), c.run_id)
        for c, r in zip(children, runs, strict=True)
    }
    found = report.write(
        children,
        columns,
        metric,
        mode,
        folder,
        history=lambda run_id: history(client, run_id, metric),
        title=f"{len(children)} runs, {metric}",
        links=links,
        address=_address(uri),
        labels=labels,
        label_settings=LABEL_SETTINGS,
        leading=FIRST,
        kind="Comparison",
        # The objective across one or two settings, as a sweep's; past that, the plots over seeds.
        grid_plots=len(keys) <= 2,
    )
    page, table = folder / PAGE, folder / TABLE
    (folder / TABLE_HTML).replace(page)
    (folder / TABLE_CSV).replace(table)
    for experiment_id in sorted({str(r.info.experiment_id) for r in runs}):
        # `ui` names the page for each experiment whose runs it compares (not the default one's).
        local_views.remember_page(uri, client.get_experiment(experiment_id).name, page, _words(args))
    configs = found.configs or seed_summary.configurations(
        children, keys, mode, labels=labels, most_settings=LABEL_SETTINGS, leading=FIRST
    )
    counts: dict[str, int] = {}
    for c in children:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    runs_said = f"{len(children)} run{'' if len(children) == 1 else 's'} ({statuses})"
    configs_said = f"{len(configs)} configuration{'' if len(configs) == 1 else 's'}"
    print(f"Compared {runs_said} in {configs_said} on {metric} ({mode}).")
    said = [seed_summary.verdict(configs, metric)]
    unlogged = [c.name for c in children if c.finished and c.objective is None]
    if unlogged:
        named = ", ".join(unlogged[:3]) + (", …" if len(unlogged) > 3 else "")
        said.append(
            f"{len(unlogged)} finished run{' is' if len(unlogged) == 1 else 's are'} left out: "
            f"{'it' if len(unlogged) == 1 else 'they'} never logged {metric} ({named})."
        )
    repeated = [c.name for c in children if c.repeated]
    if repeated:
        named = ", ".join(repeated[:3]) + (", …" if len(repeated) > 3 else "")
        said.append(
            f"{len(repeated)} run{' was' if len(repeated) == 1 else 's were'} run again later with the "
            f"same settings and seed ({named}): each seed counts once, by its latest run."
        )
    for sentence in said:
        print("\n".join(wrap(sentence, WIDTH, first="  ", indent="    ")))
    print(f"  page     {page.resolve()}")
    print(f"  table    {table.resolve()}")
    return 0


def _words(args: argparse.Namespace) -> list[str]:
    """What the command compared (its runs, env, metric and mode), as `compare` takes it again."""
    options = (("--env", args.env), ("--metric", args.metric), ("--mode", args.mode))
    return [*args.runs, *(word for name, value in options if value for word in (name, value))]


def counted_once(children: Sequence[Child], columns: Sequence[str]) -> list[Child]:
    """`children` (oldest first), each finished one that a later one repeats (the same settings and
    seed: a command run twice, a single run and a sweep's job) marked repeated: a seed is one sample."""
    latest: dict[tuple[str, ...], str] = {}
    for c in children:
        if c.finished and c.objective is not None:
            latest[tuple(c.params.get(k, "") for k in columns)] = c.run_id
    return [
        dataclasses.replace(c, repeated=True)
        if c.finished
        and c.objective is not None
        and latest[tuple(c.params.get(k, "") for k in columns)] != c.run_id
        else c
        for c in children
    ]


def _none_finished(runs: Sequence[Any], metric: str) -> str:
    """Why no run can be compared: each run's status, and what finishes one."""
    if len(runs) > 1:
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(Counter(r.info.status for r in runs).items()))
        return (
            f"none of the {len(runs)} runs finished with a value of {metric} ({statuses}): compare counts "
            "FINISHED runs; one stopped goes on with python -m framework resume=RUN_ID"
        )
    run = runs[0]
    which = f"run {run.info.run_id} ({run.info.run_name})"
    if run.info.status == "RUNNING":
        return f"{which} is RUNNING: compare counts FINISHED runs; compare it once it ends"
    if run.info.status != "FINISHED":
        return (
            f"{which} ended {run.info.status}: compare counts FINISHED runs; finish it with "
            f"python -m framework resume={run.info.run_id}"
        )
    return f"{which} finished without a value of {metric}: name a metric it logged with --metric"


def _runs(client: Any, targets: Sequence[str]) -> list[Any]:
    """Each target's runs: a run id's run, or a sweep parent's children; an experiment's runs but
    its sweep parents. Each run once."""
    found: dict[str, Any] = {}
    for target in targets:
        for run in _runs_of(client, target):
            found.setdefault(str(run.info.run_id), run)
    if not found:
        raise LookupError(f"no runs in {', '.join(targets)}")
    for run in found.values():  # a resumed run's budget is its last part's (params cannot change)
        if "total_steps" in run.data.params:
            run.data.params["total_steps"] = value_of(run, "total_steps")
    return list(found.values())


def one_env(runs: Sequence[Any], env: str | None) -> list[Any]:
    """The runs of one env (`env`, else the only one they are of): a return is compared within an env;
    a ValueError naming the envs where they are of several."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[env_of(run)] = counts.get(env_of(run), 0) + 1
    listed = ", ".join(f"{name} ({n} run{'' if n == 1 else 's'})" for name, n in sorted(counts.items()))
    if env is None:
        if len(counts) > 1:
            most = max(sorted(counts), key=counts.__getitem__)  # the env of the most runs
            raise ValueError(
                f"the runs are of {len(counts)} envs: {listed}; a metric is compared within one env: "
                f"say which with --env {most}, or name the runs to compare"
            )
        return list(runs)
    names = {env.lower()}  # `--env pong` is atari:Pong's
    chosen = [r for r in runs if names & {env_of(r).lower(), env_of(r).partition(":")[2].lower(), _name(r)}]
    if not chosen:
        raise ValueError(f"--env {env}: none of the runs is of it; they are of {listed}")
    tasks = sorted({env_of(r) for r in chosen})
    if len(tasks) > 1:  # `--env atari` over Pong and Breakout
        raise ValueError(f"--env {env}: its runs are of {len(tasks)} tasks, {', '.join(tasks)}: say which")
    return chosen


def _name(run: Any) -> str:
    return str(run.data.params.get("env.name", "?")).lower()


def env_of(run: Any) -> str:
    """A run's env as `--env` names it: env.name, with its task where the plugin plays many (env=gym's
    env.id, env=atari's env.game): `gym:Acrobot-v1`, `atari:Pong`."""
    params = run.data.params
    name = str(params.get("env.name", "?"))
    task = params.get("env.game") or (params.get("env.id") if name == "gym" else None)
    return f"{name}:{task}" if task else name


def full_run_id(client: Any, target: str) -> str:
    """The run id `target` starts (the 8 characters pages and MLflow's UI show), else `target`; a
    LookupError where it starts several."""
    if not SHORT_ID.match(target):
        return target
    experiments = [e.experiment_id for e in client.search_experiments()]
    found = [
        str(r.info.run_id)
        for r in client.search_runs(experiments, max_results=MOST_RUNS)
        if str(r.info.run_id).startswith(target)
    ]
    if len(found) > 1:
        raise LookupError(f"{target}: the start of {len(found)} run ids; give more of it")
    return found[0] if found else target


def _runs_of(client: Any, target: str) -> list[Any]:
    target = full_run_id(client, target)
    if RUN_ID.match(target):
        try:
            run = client.get_run(target)
        except Exception:
            experiments = [e.experiment_id for e in client.search_experiments()]
            ids = [str(r.info.run_id) for r in client.search_runs(experiments, max_results=MOST_RUNS)]
            close = difflib.get_close_matches(target, ids, n=1)
            raise LookupError(
                f"no run {target} in {store_name(client.tracking_uri)}"
                f"{f' (did you mean {close[0]}?)' if close else ''}. A run tracked in another store is "
                "compared with tracking.uri=THAT_STORE (sqlite:///PATH/mlflow.db, or a server's address)"
            ) from None
        children = client.search_runs(
            [run.info.experiment_id], f"tags.mlflow.parentRunId = '{target}'", max_results=MOST_RUNS
        )
        return list(children) or [run]
    experiment = client.get_experiment_by_name(target)
    if experiment is None:
        names = sorted(e.name for e in client.search_experiments())
        close = difflib.get_close_matches(target, names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        if re.fullmatch(r"[0-9a-f]{1,7}", target):
            hint += " (the start of a run id is 8 characters or more, as pages show it)"
        raise LookupError(
            f"{target}: neither a run id nor an experiment{hint}; experiments: {', '.join(names) or 'none'}"
        )
    runs = client.search_runs([experiment.experiment_id], max_results=MOST_RUNS)
    parents = {r.data.tags.get("mlflow.parentRunId") for r in runs}
    return [r for r in runs if str(r.info.run_id) not in parents]


def _objective(runs: Sequence[Any], metric: str | None, mode: str | None) -> tuple[str, str]:
    """The metric compared and its mode: as given, else the runs' own (they must agree)."""
    given = metric is not None
    if metric is None:
        named = {r.data.params.get("objective.metric") for r in runs} - {None}
        if len(named) != 1:
            raise ValueError(
                f"the runs' objectives differ ({', '.join(sorted(named))}): say which with --metric"
                if named
                else "the runs name no objective.metric: say which metric with --metric"
            )
        metric = named.pop()
    logged = set().union(*(r.data.metrics for r in runs))
    if metric not in logged:
        if not given:  # their objective: never the untrained agent's nor another metric by its likeness
            raise ValueError(
                f"no run logged {metric}, the runs' objective (objective.metric): they stopped before an "
                f"evaluation; they logged: {', '.join(sorted(logged)) or 'nothing'} (--metric picks one)"
            )
        close = difflib.get_close_matches(metric, sorted(logged), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(
            f"--metric {metric}: no run logged it{hint}; they logged: {', '.join(sorted(logged))}"
        )
    if mode is None:
        modes = {
            r.data.params.get("objective.mode")
            for r in runs
            if r.data.params.get("objective.metric") == metric
        }
        if not modes:  # no run's objective: which way is better is the user's to say
            raise ValueError(
                f"--metric {metric} is not the runs' objective (objective.metric): say which way is "
                f"better, --mode max (higher) or --mode min (lower, as for a loss)"
            )
        if len(modes) > 1:
            raise ValueError(
                f"the runs judge {metric} both ways (objective.mode max and min): say which (--mode)"
            )
        mode = str(modes.pop())
    return metric, mode


def differing(runs: Sequence[Any]) -> list[str]:
    """The params whose values differ between the runs (a param some runs lack differs), but the
    seed and the bookkeeping: what sets configurations apart. The plugins first, then the params
    whose values differ where they are set (`lr`), last those that differ only by being set (a DQN
    setting a PPO run lacks: its plugin named already says so), so that a label leads with them."""
    keys = set().union(*(r.data.params for r in runs))
    found = [k for k in keys if not BOOKKEEPING.match(k) and len({r.data.params.get(k) for r in runs}) > 1]

    def order(key: str) -> tuple[int, int, str]:
        if key in FIRST:
            return (0, FIRST.index(key), key)
        values = {r.data.params[key] for r in runs if key in r.data.params}
        return (1 if len(values) > 1 else 2, 0, key)

    return sorted(found, key=order)


def _address(uri: str) -> str:
    """Where the page opens runs: the tracking server, the `ui` serving this store, or ui's default."""
    running = local_views.running(uri) if uri.startswith("sqlite:///") else None
    return str(running["address"]) if running else summary_page.address_of(uri)


def _store(overrides: list[str]) -> tuple[str, str]:
    """The store and experiment as `ui` names them (a SQLite store by its resolved path)."""
    uri, experiment = local_views.tracking(overrides)
    if uri.startswith(local_views.SQLITE):
        uri = f"{local_views.SQLITE}{Path(uri[len(local_views.SQLITE) :]).resolve()}"
    return uri, experiment
