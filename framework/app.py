"""The Hydra application: compose the config from every installed conf package, then run it."""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from framework import STARTED_AT, commands, composes, config, registry, run_dirs
from framework.columns import refusal
from framework.conf_packages import EntryPointSearchPath, register_schemas
from framework.contracts.sweeper import parent_run_of_this_job, run_name_of_this_job
from framework.errors import ConfigError, ExplainedError, JobFailed, RunFailed
from framework.hydra_errors import hydra_message
from framework.interrupts import (
    EXIT_KILLED,
    JOB_INTERRUPTED,
    STOP_ASKED,
    forget_caught_interrupt,
    remember_ctrl_c,
)
from framework.summary import say

# A launcher's worker resolves its job's directory too, having imported nothing but this module.
run_dirs.register_resolver()

#: A sweep's parent run this process was started under (a job's process), not one it opened.
INHERITED_PARENT = parent_run_of_this_job()

#: Hydra's variable for showing whole tracebacks; without it a user's mistake is one message.
FULL_ERROR_ENV = "HYDRA_FULL_ERROR"
#: The user's own setting of it (Hydra's is set for the duration of main()).
USER_FULL_ERROR_ENV = "FRAMEWORK_FULL_ERROR"


#: What a launcher raises when a worker running a job dies (loky's, Ray's): no bug, said in one line.
WORKER_DIED = ("TerminatedWorkerError", "WorkerCrashedError", "BrokenProcessPool")
#: The process id of the command's own process, which its jobs' processes (joblib's, Ray's) are not.
COMMAND_PID_ENV = "FRAMEWORK_COMMAND_PID"


def task(cfg: DictConfig) -> float | None:
    """Hydra's task function: one job of a run or a sweep (a child of the sweep's parent run)."""
    from framework.run import RunKilled, run

    hc = HydraConfig.get()
    sweep = hc.mode == RunMode.MULTIRUN
    overrides = config.task_overrides(hc.overrides.task)
    if sweep and STOP_ASKED.is_set():  # its sweep is stopping: a job not started yet is not started
        run_dirs.forget_if_unused(Path(hc.runtime.output_dir))
        return None
    try:
        final = run(
            cfg,
            run_dir=Path(hc.runtime.output_dir),
            overrides=overrides,
            parent_run_id=parent_run_of_this_job(),
            run_name=run_name_of_this_job() if sweep else None,
            # A single run started with the process; a sweep's job when Hydra handed it over.
            started_at=time.time() if sweep else STARTED_AT,
        )
    except RunKilled:
        if sweep:
            JOB_INTERRUPTED.set()
        if _in_launcher_worker():  # ended KILLED and said so; the launcher waits for its other jobs
            return None
        raise
    # Reported here, not by Hydra, which would add a line of its own; HYDRA_FULL_ERROR=1 shows all.
    except (ConfigError, ConfigKeyError, ConfigAttributeError) as e:
        # OmegaConf's: a key every run reads that the command line deleted (`~seed`)
        message = str(e) if isinstance(e, ConfigError) else hydra_message(e)
        run_dirs.forget_if_unused(Path(hc.runtime.output_dir))
        if os.environ.get(USER_FULL_ERROR_ENV) == "1" or message is None:
            raise
        _fail_job(message)
    except RunFailed as e:
        if os.environ.get(USER_FULL_ERROR_ENV) == "1":
            raise
        cause = e.__cause__ or e
        if isinstance(cause, ConfigError | ExplainedError):  # said whole in one message: no traceback
            say(refusal(str(cause), sys.stderr), file=sys.stderr)  # in the run's log too, as its end
        else:
            say("".join(traceback.format_exception(cause)).rstrip(), file=sys.stderr)
        say(e.summary, file=sys.stderr)
        _fail_job(None)
    # The return value is what a Hydra sweeper (Optuna, Nevergrad) optimises.
    return final.get(str(cfg.objective.metric))


def _setup() -> None:
    """Register schemas, resolvers and this project's Hydra plugins, which Hydra's own scan misses in an
    editable install (its path hook lists no modules)."""
    register_schemas()
    composes.install()
    commands.register_help_resolver()
    run_dirs.register_resolver()
    Plugins.instance().register(EntryPointSearchPath)
    for name in registry.names("sweeper"):
        Plugins.instance().register(registry.load("sweeper", name).hydra_sweeper)


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The config the command line would build from `overrides`, for notebooks and tests."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    _setup()
    with initialize_config_module(config_module="framework_conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides or [])


def resumed_overrides(argv: list[str]) -> list[str]:
    """With `resume=`, a key of a plugin section is set whether or not the default plugin has it
    (`++env.continuous=false`): the command composes the default groups, and the key is checked
    against the config of the plugin the resumed run used, which it goes on with."""
    if not any(a.startswith("resume=") and a not in ("resume=", "resume=null") for a in argv):
        return argv
    sections = config.plugin_sections()

    def forced(arg: str) -> str:
        key = arg.split("=", 1)[0]
        in_a_section = arg[:1].isalpha() and "=" in arg and "." in key and key.split(".")[0] in sections
        return f"++{arg}" if in_a_section else arg

    return [forced(a) for a in argv]


def main() -> None:
    """`python -m framework OVERRIDES`: a mistake is one message and exit status 1, a bug a traceback."""
    full = os.environ.get(FULL_ERROR_ENV) == "1"
    os.environ[USER_FULL_ERROR_ENV] = "1" if full else "0"
    os.environ[COMMAND_PID_ENV] = str(os.getpid())
    # Hydra then re-raises what it would print; what a user sees is decided here.
    os.environ[FULL_ERROR_ENV] = "1"
    args = sys.argv[1:]
    if {"-sc", "--shell-completion"} & set(args) and {"query=bash", "query=zsh", "query=fish"} & set(args):
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115  # a completion query prints candidates only
    try:
        _main()
    finally:  # a directory Hydra resolved but nothing ran in (`--cfg hydra --resolve`) is not left behind
        run_dirs.forget_claimed()


def _main() -> None:
    full = os.environ.get(USER_FULL_ERROR_ENV) == "1"
    try:
        if "--experimental-rerun" in sys.argv[1:]:  # Hydra's pickle of a job cannot hold our schema's type
            raise ConfigError(
                "--experimental-rerun is not supported: resume=RUN_DIR continues a run, and a run "
                "directory's .hydra/overrides.yaml holds the overrides that run it again"
            )
        remember_ctrl_c()
        _setup()
        sys.argv[1:] = resumed_overrides(sys.argv[1:])
        hydra.main(version_base="1.3", config_path=None, config_name="config")(task)()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM before a run existed (a run ends KILLED itself)
        forget_caught_interrupt()
        if {"-m", "--multirun"} & set(sys.argv[1:]) and parent_run_of_this_job() in (None, INHERITED_PARENT):
            run_dirs.forget_claimed()  # its first job had not started: nothing was tracked
            print("Sweep stopped before its first run started: nothing was tracked.", file=sys.stderr)
        elif {"-m", "--multirun"} & set(sys.argv[1:]):
            JOB_INTERRUPTED.set()  # the sweep's parent ends KILLED (on exit), and its children with it
            print("Sweep stopped: its runs end KILLED.", file=sys.stderr)
        else:
            run_dirs.forget_claimed()  # the run's directory, where it holds nothing yet
            print("Stopped before the run started: nothing was tracked.", file=sys.stderr)
        sys.exit(EXIT_KILLED)
    except JobFailed as e:  # in a Ray worker: said there, or to be said here
        if e.message is not None:
            _refuse(e.message)
        sys.exit(1)
    except ConfigError as e:
        if full:
            raise
        _refuse(str(e))
    except BrokenPipeError:  # `--help | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except Exception as e:
        message = hydra_message(e, registry.names("command"))
        if message is None:  # a resolver's refusal (run_dirs), which OmegaConf wraps twice
            inner: BaseException | None = e
            while inner is not None and not isinstance(inner, ConfigError):
                inner = inner.__cause__ or inner.__context__
            message = str(inner) if inner is not None else None
        if message is None and type(e).__name__ in WORKER_DIED and {"-m", "--multirun"} & set(sys.argv[1:]):
            message = (
                f"A worker process of the sweep's launcher died ({type(e).__name__}: killed?), and the "
                "launcher stopped the sweep: the runs it ran end as the summary above says, each "
                "resumed with resume=JOB_DIR (multirun/DATE/TIME/N) or its run id"
            )
        if message is None and isinstance(e, OSError):  # a run or sweep directory it cannot make
            given = [a for a in sys.argv[1:] if a.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]
            named = [a for a in given if e.filename is not None and a.partition("=")[2] == str(e.filename)]
            if named:
                message = (
                    f"{named[0]}: cannot make that directory ({e.strerror}): give one that can be made here"
                )
        if full or message is None:
            raise
        _refuse(message)


def _refuse(message: str) -> None:
    run_dirs.forget_claimed()  # a sweep refused before its first job: its folder goes too
    print(refusal(message, sys.stderr), file=sys.stderr)
    sys.exit(1)


def _fail_job(message: str | None) -> None:
    """End a failed job: exit 1 after `message` (None: said); in a launcher's worker, raise JobFailed."""
    if _in_launcher_worker():
        raise JobFailed(message)
    if message is not None:
        _refuse(message)
    sys.exit(1)


def _in_launcher_worker() -> bool:
    """Whether this job runs in a launcher's worker (joblib's, Ray's), not in the command's own process."""
    return _in_ray_worker() or os.environ.get(COMMAND_PID_ENV, str(os.getpid())) != str(os.getpid())


def _in_ray_worker() -> bool:
    """Whether this is a Ray worker (a job of Hydra's Ray launcher); Ray is only looked at if imported."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return False
    worker = getattr(ray.get_runtime_context(), "worker", None)
    return getattr(worker, "mode", None) == ray.WORKER_MODE
