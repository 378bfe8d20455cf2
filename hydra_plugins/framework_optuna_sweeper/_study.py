"""The Optuna study of a `hydra/sweeper=optuna` sweep: its storage, sampler and pruner, by name.

The sweep's process asks for trials and tells their results (`_impl`); each job
opens the same study to report its evaluations (`_trial`). Both build the pruner from one
description, so that a job in another process prunes by the sweep's rule.
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf, read_write

from framework.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    import optuna

    from hydra_plugins.framework_optuna_sweeper._search_space import SearchSpace

log = logging.getLogger("framework")

#: sampler name → Optuna's class.
SAMPLERS = {"tpe": "TPESampler", "cmaes": "CmaEsSampler", "random": "RandomSampler", "grid": "GridSampler"}
#: pruner name → Optuna's class.
PRUNERS = {
    "median": "MedianPruner",
    "successive_halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
    "none": "NopPruner",
}
#: The study's user attributes: its MLflow parent run (a resumed study reopens it), and the pruner
#: its jobs build (pruner_spec).
PARENT_ATTR = "framework.parent_run_id"
PRUNER_ATTR = "framework.pruner"
#: When a sweep created the study (its claim of it), and how long another sweep that starts the
#: study at the same moment waits for the parent run the first records.
CLAIMED_ATTR = "framework.claimed_at"
CLAIM_WAIT_S = 60.0
#: How long a study just made may go without its claim marked (between its creation and the mark).
CLAIM_MARK_S = 5.0
#: The study's user attribute naming the metric its trials' values are of.
OBJECTIVE_ATTR = "objective"
#: The study's fixed overrides (its trials' shared command line), which a sweep that adds trials keeps.
FIXED_ATTR = "fixed"
#: Fixed overrides that say how trials are run or shown, not what they train nor how it is measured.
NOT_TRAINED = (
    "hydra",
    "tracking",
    "progress",
    "log_every_s",
    "threads",
    "device",
    "checkpoint",
    "ray",
    "resume",
)
#: The file of the study, beside the tracking store (or in the working directory).
DEFAULT_FILE = "optuna.db"
#: How long a job waits for the SQLite file another process is writing.
SQLITE_TIMEOUT_S = 60
#: Heartbeats a running trial may miss before it counts as left by a sweep that was killed.
STALE_AFTER = 3


def check(sweeper: DictConfig) -> None:
    """Refuse, before anything starts, a sampler or pruner that does not exist."""
    for field, names in (("sampler", SAMPLERS), ("pruner", PRUNERS)):
        chosen = str(sweeper.get(field))
        if chosen not in names:
            raise ConfigError(f"hydra.sweeper.{field}={chosen} is not one of: {', '.join(names)}")
    for field in ("n_trials", "n_jobs", "heartbeat_s"):
        if int(sweeper.get(field)) < 1:
            raise ConfigError(f"hydra.sweeper.{field}={sweeper.get(field)}: give 1 or more")
    rate = sweeper.get("max_failure_rate")
    if not 0.0 <= float(rate) <= 1.0:
        raise ConfigError(
            f"hydra.sweeper.max_failure_rate={rate}: the share of the trials that may fail, from 0 (none: "
            "the default) to 1 (all)"
        )


def storage_url(sweeper: DictConfig, cfg: DictConfig) -> str:
    """`hydra.sweeper.storage`, else a SQLite file beside the tracking store (a sqlite:/// URI), else
    in the working directory."""
    if sweeper.get("storage"):
        return str(sweeper.storage)
    uri = OmegaConf.select(cfg, "tracking.uri", default=None)
    folder = Path.cwd()
    if isinstance(uri, str) and uri.startswith("sqlite:///"):
        folder = Path(uri[len("sqlite:///") :]).resolve().parent
    return f"sqlite:///{folder / DEFAULT_FILE}"


def shown(url: str) -> str:
    """The storage URL without a password, for logs and tags."""
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)


def open_storage(url: str, heartbeat_s: int | None = None) -> optuna.storages.RDBStorage:
    """Optuna's storage at `url`; a SQLite file waits for other writers rather than failing. With
    `heartbeat_s`, trials whose heartbeat stopped for STALE_AFTER of them count as stale."""
    import warnings

    import optuna

    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    if heartbeat_s is not None:
        kwargs.update(heartbeat_interval=heartbeat_s, grace_period=heartbeat_s * STALE_AFTER)
    attempt = 0
    while True:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats: 2.9+
                return optuna.storages.RDBStorage(url, **kwargs)
        except Exception as e:  # a URL SQLAlchemy cannot open: a missing driver, folder or server
            attempt += 1
            if attempt < 3 and re.search(r"already exists|UNIQUE constraint|[Dd]uplicate", str(e)):
                time.sleep(0.2)  # another sweep made a new store's tables at the same moment: they are there
                continue
            dialect = re.search(r"Can't load plugin: sqlalchemy\.dialects:(\w+)", str(e))
            if dialect:  # `postgres://`: SQLAlchemy knows the dialect as postgresql
                known = ("sqlite", "postgresql", "mysql", "mariadb", "oracle", "mssql")
                schemes = [f"{k}://" for k in known]
                raise ConfigError(
                    f"hydra.sweeper.storage={shown(url)}: SQLAlchemy has no database {dialect[1]}:// "
                    f"(it knows {', '.join(schemes)}).{did_you_mean(f'{dialect[1]}://', schemes)}"
                ) from None
            raise ConfigError(f"hydra.sweeper.storage={shown(url)} cannot be opened: {e}") from None


def name_the_study(sweeper: DictConfig) -> str:
    """`hydra.sweeper.study_name`; a sweep that names none starts a new study, named here (once, in the
    sweep's config, where the parent run and the sweeper read it)."""
    if not sweeper.get("study_name"):
        with read_write(sweeper):
            sweeper.study_name = time.strftime("study-%Y%m%d-%H%M%S")
    return str(sweeper.study_name)


def recorded_parent(sweeper: DictConfig, cfg: DictConfig) -> str | None:
    """The MLflow parent run of the study named by `hydra.sweeper.study_name` (None: a new study, whose
    parent this sweep opens). Two sweeps that start one study at once (on two machines) share a parent:
    the study's creation is the claim (a store refuses a second study of a name), and the sweep that
    did not create it waits for the parent the other records (CLAIM_WAIT_S)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(storage_url(sweeper, cfg))
    name = str(sweeper.study_name)
    direction = "maximize" if str(cfg.objective.mode) == "max" else "minimize"
    try:
        study = optuna.create_study(study_name=name, storage=storage, direction=direction)  # type: ignore[arg-type]
        study.set_user_attr(CLAIMED_ATTR, time.time())
        return None
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage)
    params = sweeper.get("params") or {}
    check_goes_on(
        study, cfg, fixed_overrides(OmegaConf.select(cfg, "hydra.overrides.task", default=None) or [], params)
    )
    if OmegaConf.select(cfg, "tracking.uri", default=None) is None:
        return None  # tracking=none: no parent run to share
    began = time.monotonic()
    while True:
        study = optuna.load_study(study_name=name, storage=storage)
        parent = study.user_attrs.get(PARENT_ATTR)
        if parent:
            return str(parent)
        claimed = study.user_attrs.get(CLAIMED_ATTR)
        waited = time.monotonic() - began
        if not isinstance(claimed, float | int):  # made this moment, its claim not marked yet; or elsewhere
            if study.trials or waited > CLAIM_MARK_S:
                return None
        elif time.time() - claimed > CLAIM_WAIT_S or waited > CLAIM_WAIT_S:
            return None  # its sweep stopped before it opened a parent (or tracks nothing)
        time.sleep(0.2)  # the poll of a wait with a deadline


def fixed_overrides(task: Sequence[str], params: Mapping[str, Any]) -> list[str]:
    """What a sweep's trials share (its command line's overrides not searched), and the keys it
    searches (`hydra.sweeper.params`' too), as `searched(KEY,...)`: see `with_searched`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(task))
    except Exception:  # refused in one message where its search space is read
        return []
    searched = {str(o.get_key_element()) for o in parsed if o.is_sweep_override()} | {str(k) for k in params}
    return with_searched(
        [o.input_line for o in parsed if not o.is_sweep_override() and o.input_line], searched
    )


def with_searched(fixed: Sequence[str], searched: Iterable[str]) -> list[str]:
    """A sweep's fixed overrides and the keys it searches, as a study records them: trials that search
    other keys (a key fixed by its preset now) are not configurations of its study."""
    return [*fixed, f"searched=({','.join(sorted(searched))})"]


def trained_by(fixed: Sequence[str]) -> list[str]:
    """The fixed overrides that change what a trial trains or how it is measured, sorted."""
    return sorted(
        o for o in fixed if o.split("=", 1)[0].lstrip("+~").split(".")[0].split("/")[0] not in NOT_TRAINED
    )


def check_goes_on(study: optuna.Study, cfg: DictConfig, fixed: Sequence[str]) -> None:
    """A ConfigError where this sweep's objective is not the study's (its trials' values would be of
    another metric, or ranked the other way), or its fixed overrides are not (another budget, env)."""
    recorded_fixed = study.user_attrs.get(FIXED_ATTR)
    if isinstance(recorded_fixed, list) and recorded_fixed != trained_by(fixed):
        before, now = (
            dict(o.partition("=")[::2] for o in lines) for lines in (recorded_fixed, trained_by(fixed))
        )
        unset = "(not given)"
        differ = [
            f"{key}: the study's {before.get(key, unset)}, this command's {now.get(key, unset)}"
            for key in sorted(before.keys() | now.keys())
            if before.get(key) != now.get(key)
        ]
        raise ConfigError(
            f"hydra.sweeper.study_name={study.study_name}: that study's trials ran otherwise "
            f"({'; '.join(differ)}), "
            "and this command's would be ranked beside them as if trained alike: give the study's, or name "
            "a new study"
        )
    name, metric, mode = study.study_name, str(cfg.objective.metric), str(cfg.objective.mode)
    direction = study.direction.name.lower()
    if direction != ("maximize" if mode == "max" else "minimize"):
        raise ConfigError(
            f"hydra.sweeper.study_name={name}: that study {direction}s its objective; objective.mode={mode} "
            "asks the opposite (name a new study)"
        )
    recorded = study.user_attrs.get(OBJECTIVE_ATTR)
    if recorded is not None and recorded != metric:
        raise ConfigError(
            f"hydra.sweeper.study_name={name}: that study's trials are valued by {recorded}; "
            f"objective.metric={metric} would value its new ones by another metric (give "
            f"objective.metric={recorded}, or name a new study)"
        )


def make_sampler(sweeper: DictConfig, space: SearchSpace) -> optuna.samplers.BaseSampler:
    """The sampler by name, seeded by `hydra.sweeper.seed`, with `hydra.sweeper.sampler_kwargs`."""
    import optuna

    name = str(sweeper.sampler)
    kwargs = _kwargs(sweeper, "sampler_kwargs")
    kwargs.setdefault("seed", sweeper.get("seed"))
    if name == "grid":
        kwargs["search_space"] = space.grid()
    cls = getattr(optuna.samplers, SAMPLERS[name])
    return _build(cls, kwargs, f"hydra.sweeper.sampler={name}")


def pruner_spec(sweeper: DictConfig, cfg: DictConfig) -> dict[str, Any]:
    """The pruner by name, with defaults from the run's budget (`total_steps`, `eval.every_steps`)
    under `hydra.sweeper.pruner_kwargs`: what every job rebuilds its pruner from."""
    name = str(sweeper.pruner)
    total = int(OmegaConf.select(cfg, "total_steps", default=0) or 0)
    every = int(OmegaConf.select(cfg, "eval.every_steps", default=0) or 0)
    defaults: dict[str, Any] = {}
    if name == "median":  # rl-zoo3's rule: no pruning in the first third of the budget
        defaults = {"n_startup_trials": 5, "n_warmup_steps": total // 3}
    elif name == "successive_halving" and every > 0:
        defaults = {"min_resource": every}
    elif name == "hyperband" and every > 0:
        defaults = {"min_resource": every, "max_resource": max(total, every), "reduction_factor": 3}
    return {"name": name, "kwargs": {**defaults, **_kwargs(sweeper, "pruner_kwargs")}}


def make_pruner(spec: Mapping[str, Any]) -> optuna.pruners.BasePruner:
    import optuna

    cls = getattr(optuna.pruners, PRUNERS[str(spec["name"])])
    return _build(cls, dict(spec["kwargs"]), f"hydra.sweeper.pruner={spec['name']}")


def _kwargs(sweeper: DictConfig, field: str) -> dict[str, Any]:
    value = sweeper.get(field)
    if value is None:
        return {}
    data = OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value
    if not isinstance(data, dict):
        raise ConfigError(f"hydra.sweeper.{field} must be a mapping, not {value!r}")
    return {str(k): v for k, v in data.items()}


def _build(cls: type, kwargs: dict[str, Any], what: str) -> Any:
    accepted = inspect.signature(cls).parameters
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        valid = ", ".join(p for p in accepted if p not in ("self", "search_space"))
        raise ConfigError(f"{what}: {', '.join(unknown)} not accepted by optuna's {cls.__name__} ({valid})")
    try:
        return cls(**kwargs)
    except ImportError as e:  # a sampler's own package missing (cmaes)
        raise ConfigError(f"{what} needs a package that is not installed: {e}") from None
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{what}: {cls.__name__}({kwargs}) refused: {e}") from None


def fail_stale_trials(study: optuna.Study) -> int:
    """Mark FAIL the trials a killed sweep left RUNNING (their heartbeats stopped); how many."""
    import warnings

    import optuna

    before = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))) - before


@contextmanager
def heartbeats(study: optuna.Study, trials: Sequence[optuna.Trial], every_s: float) -> Iterator[None]:
    """Record the heartbeat of `trials` every `every_s` while they run (Optuna does it only for
    trials its own optimize() runs; a sweep asks for its trials and runs them itself)."""
    storage = study._storage
    stop = threading.Event()

    def beat() -> None:
        while True:
            for trial in trials:
                try:
                    storage.record_heartbeat(trial._trial_id)  # type: ignore[attr-defined]
                except Exception as e:  # a storage that is briefly locked: the next beat will do
                    log.debug("heartbeat of trial %d: %s", trial.number, e)
            if stop.wait(every_s):
                return

    thread = threading.Thread(target=beat, name="optuna-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_s + SQLITE_TIMEOUT_S)
