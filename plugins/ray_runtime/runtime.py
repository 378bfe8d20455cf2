"""The run's Ray: the cluster at `ray.address`, else a local Ray on 127.0.0.1 that lives as long as the run.

Nothing here imports Ray until a plugin asks for it (`ensure()`): a run that never uses Ray never
starts one. A run configures it once (`configure`: values and the address checked before the run
starts), and ends it once (`shutdown`): a local Ray this process started stops, with every actor in
it, and its session directory goes; a cluster it joined is only left. A plugin holds what it asks
for to what there is (`check_capacity`) before it starts anything, and waits on Ray through `wait`
and `get`, which give up when the run is asked to stop.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from framework import machine
from framework.errors import ConfigError

from . import address as ray_address
from . import host

log = logging.getLogger("framework")

#: Where a local Ray binds: this machine only, unless a cluster is configured (ray.address).
LOCAL_HOST = "127.0.0.1"
#: Ray reads this when it is imported: "0" makes the Ray it starts bind and advertise 127.0.0.1 (Ray's
#: single-machine mode). Without it Ray 2.60 turns a `_node_ip_address` of 127.0.0.1 into the machine's
#: address and listens on every interface.
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

_lock = threading.Lock()
_settings: dict[str, Any] = {}
_owned = False
"""This process started the Ray it is connected to (and stops it in shutdown)."""
_joined = False
"""This process joined the cluster at ray.address (and leaves it in shutdown)."""
_reaper: Any = None
"""The watcher that stops the local Ray's processes if this process dies without stopping them."""
_session_dir: str | None = None
"""The session directory of the local Ray this process started (its logs, sockets, spilled objects)."""
"""The run's stop flag (set by the first Ctrl-C), which `wait` and `get` give up on by default."""


def configure(settings: Any) -> None:
    """The run's `ray` section (address, num_cpus, num_gpus, init_timeout_s); starts nothing, but
    refuses now, before the run starts, a value that is wrong, or an address where no Ray answers."""
    global _settings
    address = getattr(settings, "address", None)
    num_cpus = getattr(settings, "num_cpus", None)
    num_gpus = getattr(settings, "num_gpus", None)
    timeout = float(getattr(settings, "init_timeout_s", 120.0))
    if num_cpus is not None and num_cpus < 1:
        raise ConfigError(
            f"ray.num_cpus={num_cpus} is not valid: the local Ray's CPUs, at least 1 "
            f"(null: this machine's {machine.cpus()})"
        )
    if num_gpus is not None and num_gpus < 0:
        raise ConfigError(
            f"ray.num_gpus={num_gpus} is not valid: the local Ray's GPUs, 0 or more (null: those it finds)"
        )
    if not (math.isfinite(timeout) and timeout > 0):
        raise ConfigError(
            f"ray.init_timeout_s={timeout:g} is not valid: seconds that starting or joining Ray may take, "
            "more than 0 (default 120)"
        )
    if address:
        address = ray_address.check_address(str(address))
    _settings = {"address": address, "num_cpus": num_cpus, "num_gpus": num_gpus, "init_timeout_s": timeout}


def check_address(address: str, timeout_s: float = ray_address.PROBE_TIMEOUT_S) -> str:
    """The host:port `address` names (`auto` resolved); a ConfigError unless a Ray cluster answers."""
    return ray_address.check_address(address, timeout_s)


def local_cpus() -> int:
    """The CPUs a local Ray of this run offers: `ray.num_cpus`, else this machine's."""
    return int(_settings.get("num_cpus") or machine.cpus())


def check_capacity(*, cpus: float, gpus: float, memory_bytes: int, what: str, keys: str) -> None:
    """Refuse, in one line naming asked and available and the keys to change, actors that together
    ask for more than the run's Ray has: `what` (e.g. "4 self-play workers and 3 inference actors")
    asks for `cpus`, `gpus` and `memory_bytes`; `keys` are the settings that ask (`search.workers=4`).

    Without ray.address, before any Ray starts: against the local Ray it would start (ray.num_cpus,
    else this machine's CPUs; ray.num_gpus, else the GPUs found; memory free now). With ray.address,
    or in a process already connected to a Ray: against that cluster's totals, which connects to it
    (ensure()) when not yet connected.
    """
    ray = sys.modules.get("ray")
    local = not _settings.get("address") and not (ray is not None and ray.is_initialized())
    if local:
        num_gpus = _settings.get("num_gpus")
        have_cpus, have_memory = float(local_cpus()), float(host.memory_available_bytes())
        # Only a run that asks for GPUs looks for them (nvidia-smi takes a moment).
        have_gpus = float(num_gpus if num_gpus is not None else host.gpus() if gpus > 0 else 0)
        cpus_from = _cpus_from()
        where, memory_kind = "the local Ray has", "free"
    else:
        totals = ensure().cluster_resources()
        have_cpus, have_gpus = float(totals.get("CPU", 0)), float(totals.get("GPU", 0))
        have_memory, cpus_from = float(totals.get("memory", 0)), ""
        address = _settings.get("address")
        where = f"the cluster at ray.address={address} has" if address else "the connected Ray has"
        if _owned:  # started by this run (an earlier engine's ensure): still the local Ray
            where, cpus_from = "the local Ray has", _cpus_from()
        memory_kind = "for tasks"
    rows = [  # asked, available, each as a number and in words
        (cpus, have_cpus, f"{cpus:g} CPUs", f"{have_cpus:g} CPUs" + (f" ({cpus_from})" if cpus_from else "")),
        (gpus, have_gpus, f"{gpus:g} GPUs", f"{have_gpus:g} GPUs"),
        (memory_bytes, have_memory, f"{host.gib(memory_bytes)} of memory",
         f"{host.gib(have_memory)} of memory {memory_kind}"),
    ]  # fmt: skip
    short = [row for row in rows if row[0] > row[1]]
    if not short:
        return
    fix = "ask for less" if local or _owned else "ask for less, or add nodes to the cluster"
    if (local or _owned) and short == rows[:1]:  # CPUs alone: Ray's CPUs are slots, which a user may share
        fix += f", or let the local Ray share its CPUs between them: ray.num_cpus={math.ceil(cpus)}"
    raise ConfigError(
        f"{keys}: {what} ask for {', '.join(r[2] for r in short)}; {where} {', '.join(r[3] for r in short)}: "
        f"{fix}"
    )


def ensure(min_cpus: float = 0.0) -> Any:
    """The `ray` module, connected: to the configured cluster, or to a local Ray started now.

    A local Ray offers `ray.num_cpus` logical CPUs, else this machine's (`local_cpus()`). Actors
    that reserve `min_cpus` together and would not all fit are refused (ConfigError), before any
    Ray starts: an actor that finds no CPU free waits forever. Only `ray.num_cpus` lets a local
    Ray offer more CPUs than the machine has (Ray's CPUs are slots, which a user may share).

    A process that is already connected (a Ray worker, a test session's Ray, a Hydra Ray
    launcher's job) keeps its connection and does not own it.
    """
    global _owned, _joined, _reaper, _session_dir
    address = _settings.get("address")
    if not address or str(address).rsplit(":", 1)[0] in (LOCAL_HOST, "localhost"):
        prefer_loopback()
    import ray

    with _lock:
        if ray.is_initialized():
            return ray
        timeout = _settings.get("init_timeout_s", 120.0)
        started = time.perf_counter()
        quiet = _quiet_ray_startup()
        try:
            if address:
                options: dict[str, Any] = {"address": str(address)}
                if str(address).rsplit(":", 1)[0] in (LOCAL_HOST, "localhost"):
                    # A Ray of this machine advertising 127.0.0.1 (start_local): its raylet is there.
                    options["_node_ip_address"] = LOCAL_HOST
                _init_with_timeout(ray, timeout, **options)
                _joined = True
            else:
                num_cpus = local_cpus()
                if min_cpus > num_cpus:
                    raise ConfigError(
                        f"Ray actors that reserve {min_cpus:g} CPUs together cannot all be placed: the "
                        f"local Ray has {num_cpus} ({_cpus_from()}); ask for fewer, or let it share its "
                        f"CPUs between them: ray.num_cpus={math.ceil(min_cpus)}"
                    )
                from . import reaper as ray_reaper

                _reaper = ray_reaper.watch()
                context = _init_local(ray, num_cpus=num_cpus, num_gpus=_settings.get("num_gpus"))
                _owned = True
                _session_dir = context.address_info.get("session_dir")
                ray_reaper.note_session(_reaper, _session_dir)
        except ConfigError:
            raise
        except Exception as e:
            where = f"ray.address={address}" if address else "a local Ray"
            raise ConfigError(f"Ray did not start ({where}): {type(e).__name__}: {e}") from None
        finally:
            quiet()
        resources = ray.cluster_resources()
        log.info(
            "Ray %s in %.1f s: %d CPUs, %d GPUs over %d node(s)",
            f"joined at {address}" if address else "started on this machine",
            time.perf_counter() - started,
            int(resources.get("CPU", 0)),
            int(resources.get("GPU", 0)),
            len([n for n in ray.nodes() if n.get("Alive")]),
        )
        return ray


def prefer_loopback() -> bool:
    """Before Ray is imported: the Ray this process starts will bind 127.0.0.1 (its workers, which
    inherit the environment, too). False when too late (Ray already imported) or set otherwise."""
    if "ray" in sys.modules:
        return os.environ.get(LOOPBACK_ENV) == "0"
    os.environ.setdefault(LOOPBACK_ENV, "0")
    return os.environ[LOOPBACK_ENV] == "0"


def start_local(ray: Any, *, num_cpus: int | None = None, num_gpus: int | None = None) -> str:
    """Start a local Ray that advertises 127.0.0.1 and connect to it; returns its address
    (127.0.0.1:port, which another process of this machine joins with ray.address=)."""
    context = _init_local(ray, num_cpus=num_cpus, num_gpus=num_gpus)
    port = str(context.address_info["gcs_address"]).rsplit(":", 1)[1]
    return f"{LOCAL_HOST}:{port}"


def _init_local(ray: Any, *, num_cpus: int | None, num_gpus: int | None) -> Any:
    """ray.init of a local Ray on 127.0.0.1; its context (address_info: addresses, session_dir).
    Interrupted, what it had started (its processes, its session directory) ends at once."""
    from . import reaper as ray_reaper

    before = set(ray_reaper.ray_descendants(os.getpid()))
    try:
        with _own_sigterm():
            return _ray_init_local(ray, num_cpus=num_cpus, num_gpus=num_gpus)
    except BaseException:
        started = {p: t for p, t in ray_reaper.ray_descendants(os.getpid()).items() if p not in before}
        sessions = ray_reaper.session_dirs(started)  # read while they run: their command lines
        with _own_sigterm():  # a second SIGTERM meanwhile is the run's to handle, not Ray's
            with contextlib.suppress(Exception):
                ray.shutdown()  # the node's processes, where ray.init had made its node
            ray_reaper.end(started)  # and those it started before
        for session in sessions:
            ray_reaper.remove_session(session)
        raise


@contextmanager
def _own_sigterm() -> Iterator[None]:
    """The process's SIGTERM handler survives ray.init (and ray.shutdown), which replaces it in the
    main thread with one that exits at once (a driver's) or kills Ray's processes and exits 1 (a
    node's): SIGTERM
    from a scheduler must stop a run as Ctrl-C does, KILLED with a last checkpoint. The run then
    stops its Ray itself (`shutdown`), and the reaper does where the process dies first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except SystemExit as e:
        # Ray's handler, set part-way through, took a SIGTERM that was the process's: its own
        # handler has it now (a run's stops the run as Ctrl-C would, KILLED with a checkpoint).
        if e.code != signal.SIGTERM or not callable(previous):
            raise
        signal.signal(signal.SIGTERM, previous)
        previous(signal.SIGTERM, None)
        raise KeyboardInterrupt from None  # a handler that returned: the call is cut short all the same
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


#: The Ray settings of a Ray the run starts. Ray starts its workers at nice 15, below every other
#: process: beside another job (a second run, a test process) a run's actors, which are its work,
#: then get a few percent of a core, and a restart takes minutes. They compete as the run does.
#: Read-only: Ray adds its session's spilling directory to the dict it is given, so each Ray gets a copy.
SYSTEM_CONFIG: Mapping[str, Any] = MappingProxyType({"worker_niceness": 0})


def _ray_init_local(ray: Any, *, num_cpus: int | None, num_gpus: int | None) -> Any:
    return ray.init(
        # "local": a Ray of its own, even where another was started on this machine (`ray start`).
        address="local",
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        include_dashboard=False,
        _node_ip_address=LOCAL_HOST,
        logging_level=logging.WARNING,
        log_to_driver=True,
        # A copy: the next run's Ray of this process (a sweep's next job) would otherwise spill into
        # this one's session, with a warning.
        _system_config=dict(SYSTEM_CONFIG),
    )


def _init_with_timeout(ray: Any, timeout_s: float, **kwargs: Any) -> None:
    """ray.init in a thread, so that an unreachable cluster fails in `timeout_s`, not never."""
    failure: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(logging_level=logging.WARNING, **kwargs)
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=join, name="ray-init", daemon=True)
    # In a thread, Ray sets no SIGTERM handler and warns that it does not: the run keeps its own.
    unwarned = _DropMessage("SIGTERM handler is not set")
    worker_log = logging.getLogger("ray._private.worker")
    worker_log.addFilter(unwarned)
    try:
        thread.start()
        thread.join(timeout_s)
    finally:
        worker_log.removeFilter(unwarned)
    if thread.is_alive():
        raise ConfigError(
            f"ray.address={kwargs.get('address')}: no Ray cluster answered in {timeout_s:.0f} s "
            "(is it running, and reachable from here? ray.init_timeout_s sets the wait)"
        )
    if failure:
        raise failure[0]


class _DropMessage(logging.Filter):
    """Drops the log records whose message starts with `prefix`."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


#: Warns at every start of a local Ray that token authentication is on (Ray's default, which we keep).
TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


def _quiet_ray_startup() -> Any:
    """Ray's own INFO lines at start-up stay out of the run's output; returns the undo."""
    loggers = [logging.getLogger(name) for name in ("ray", "ray._private.worker", TOKEN_NOTICE_LOGGER)]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR if lg.name == TOKEN_NOTICE_LOGGER else logging.WARNING)
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")

    def undo() -> None:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)

    return undo


def check_fits(what: str, num_cpus: float, num_gpus: float, keys: str) -> None:
    """Refuse, in one line, actors that no node of a Ray this process started can ever hold (a
    GPU asked for on a machine without one). A joined cluster may grow (an autoscaler): there,
    Ray is left to place them, within the caller's own timeout."""
    import ray

    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if not _owned or any(r.get("CPU", 0) >= num_cpus and r.get("GPU", 0) >= num_gpus for r in nodes):
        return
    have = ", ".join(f"{r.get('CPU', 0):g} CPUs and {r.get('GPU', 0):g} GPUs" for r in nodes)
    raise ConfigError(
        f"{keys}: {what} of {num_cpus:g} CPUs and {num_gpus:g} GPUs cannot be placed: the local Ray has "
        f"{have}. Ask for less (search.inference_num_gpus=null uses a GPU only where there is one), or "
        "give the local Ray more with ray.num_cpus / ray.num_gpus"
    )


def owned() -> bool:
    """Whether this process started the Ray it is connected to."""
    return _owned


def shutdown(*, at_once: bool = False) -> None:
    """Stop the local Ray this process started (its actors with it) and remove its session
    directory; leave a joined cluster. `at_once`, for a process about to exit: no graceful
    ray.shutdown() (a second or more); the reaper ends the local Ray's processes and removes its
    session directory as soon as this process is gone."""
    global _owned, _joined, _reaper, _session_dir
    ray = sys.modules.get("ray")
    if at_once and _owned and _reaper is not None:
        from . import reaper as ray_reaper

        ray_reaper.end_now(_reaper)
        return
    with _lock:
        # A joined cluster goes on after ray.shutdown(): only this driver's connection ends.
        if ray is not None and ray.is_initialized() and (_owned or _joined):
            with _own_sigterm():  # a second SIGTERM meanwhile is the run's to handle, not Ray's
                ray.shutdown()
        _owned = _joined = False
        if _reaper is not None:
            from . import reaper as ray_reaper

            reaper, _reaper = _reaper, None
            ray_reaper.stop(reaper)  # and what Ray left running after its shutdown ends now
            # The reaper removed it too; this covers a reaper that died before its time.
            ray_reaper.remove_session(_session_dir)
        _session_dir = None


def _cpus_from() -> str:
    num_cpus = _settings.get("num_cpus")
    return f"ray.num_cpus={num_cpus}" if num_cpus else "this machine's CPUs"
