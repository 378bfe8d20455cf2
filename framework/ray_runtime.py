"""The run's Ray: the cluster at `ray.address`, else a local Ray on 127.0.0.1 that lives as long as the run.

Nothing here imports Ray until a plugin asks for it (`ensure()`): a run that never uses Ray never
starts one. A run configures it once (`configure`), and ends it once (`shutdown`): a local Ray this
process started stops, with every actor in it; a cluster it joined is only left.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any

from framework.errors import ConfigError

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


def configure(settings: Any) -> None:
    """The run's `ray` section (address, num_cpus, num_gpus, init_timeout_s); starts nothing, but
    an address where nothing listens is refused now, before the run starts."""
    global _settings
    address = getattr(settings, "address", None)
    if address:
        check_address(str(address))
    _settings = {
        "address": getattr(settings, "address", None),
        "num_cpus": getattr(settings, "num_cpus", None),
        "num_gpus": getattr(settings, "num_gpus", None),
        "init_timeout_s": float(getattr(settings, "init_timeout_s", 120.0)),
    }


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """A ConfigError unless something listens at `host:port` (or `ray://host:port`); `auto` passes."""
    import socket

    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if address == "auto":
        return
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ConfigError(
            f"ray.address={address} is not an address: give host:port (or ray://host:port, auto)"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except OSError as e:
        raise ConfigError(
            f"ray.address={address}: no Ray cluster answers there ({e.strerror or type(e).__name__}); "
            "start one (ray start --head) or leave ray.address unset for a local Ray of the run's own"
        ) from None


def ensure(min_cpus: float = 0.0) -> Any:
    """The `ray` module, connected: to the configured cluster, or to a local Ray started now.

    A local Ray offers `ray.num_cpus` logical CPUs, else this machine's count or `min_cpus`
    (what the caller's actors reserve together), whichever is more: Ray's CPUs are slots for
    placing actors, and an actor that finds none waits forever.

    A process that is already connected (a Ray worker, a test session's Ray, a Hydra Ray
    launcher's job) keeps its connection and does not own it.
    """
    global _owned, _joined, _reaper
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
                num_cpus = _settings.get("num_cpus") or max(os.cpu_count() or 1, math.ceil(min_cpus))
                from framework import ray_reaper

                _reaper = ray_reaper.watch()
                start_local(ray, num_cpus=num_cpus, num_gpus=_settings.get("num_gpus"))
                _owned = True
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
    import sys

    if "ray" in sys.modules:
        return os.environ.get(LOOPBACK_ENV) == "0"
    os.environ.setdefault(LOOPBACK_ENV, "0")
    return os.environ[LOOPBACK_ENV] == "0"


def start_local(ray: Any, *, num_cpus: int | None = None, num_gpus: int | None = None) -> str:
    """Start a local Ray that advertises 127.0.0.1 and connect to it; returns its address
    (127.0.0.1:port, which another process of this machine joins with ray.address=)."""
    context = ray.init(
        # "local": a Ray of its own, even where another was started on this machine (`ray start`).
        address="local",
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        include_dashboard=False,
        _node_ip_address=LOCAL_HOST,
        logging_level=logging.WARNING,
        log_to_driver=True,
    )
    port = str(context.address_info["gcs_address"]).rsplit(":", 1)[1]
    return f"{LOCAL_HOST}:{port}"


def _init_with_timeout(ray: Any, timeout_s: float, **kwargs: Any) -> None:
    """ray.init in a thread, so that an unreachable cluster fails in `timeout_s`, not never."""
    failure: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(logging_level=logging.WARNING, **kwargs)
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=join, name="ray-init", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ConfigError(
            f"ray.address={kwargs.get('address')}: no Ray cluster answered in {timeout_s:.0f} s "
            "(is it running, and reachable from here? ray.init_timeout_s sets the wait)"
        )
    if failure:
        raise failure[0]


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


def shutdown() -> None:
    """Stop the local Ray this process started (its actors with it); leave a joined cluster."""
    global _owned, _joined, _reaper
    import sys

    ray = sys.modules.get("ray")
    with _lock:
        # A joined cluster goes on after ray.shutdown(): only this driver's connection ends.
        if ray is not None and ray.is_initialized() and (_owned or _joined):
            ray.shutdown()
        _owned = _joined = False
        if _reaper is not None:
            from framework import ray_reaper

            reaper, _reaper = _reaper, None
            ray_reaper.stop(reaper)  # and what Ray left running after its shutdown ends now
