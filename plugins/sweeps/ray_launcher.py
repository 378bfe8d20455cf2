"""Hydra's Ray launcher (`hydra/launcher=ray`) as this project runs it: its defaults, its Ray started
before the sweep's signals are set, with its workers (the jobs) at the sweep's own priority, and its
Ray bound to 127.0.0.1 where it runs on this machine."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from .checks import RAY_LAUNCHER

#: The Hydra Ray launcher's class (hydra-ray-launcher), whose local Ray is kept on 127.0.0.1.
#: Ray reads it when it is imported: "0" makes a Ray started here bind 127.0.0.1 (the Ray plugin's
#: runtime.LOOPBACK_ENV).
RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: What the Ray launcher's `ray.init` and `ray.remote` get unless the command line sets them. The plugin
#: asks for a 75 MB object store, which ray.init refuses when it joins a running Ray (and which starves a
#: job that uses Ray itself); Ray runs a task again when its process exits, which a failed job's
#: sys.exit(1) does (a new child run each time); a dashboard is one more server.
RAY_LAUNCHER_DEFAULTS: dict[str, dict[str, Any]] = {
    "init": {"object_store_memory": None, "include_dashboard": False},
    "remote": {"max_retries": 0},
}


def ray_launcher_defaults(cfg: DictConfig) -> None:
    """This project's defaults for the Hydra Ray launcher, set in `cfg` before Hydra creates the launcher
    from it: RAY_LAUNCHER_DEFAULTS where the command line left them; and a Ray that the launcher starts
    on this machine binds 127.0.0.1, like every server of ours unless configured (one joined at a
    loopback address is reached there; one joined elsewhere, `hydra.launcher.ray.init.address` or
    RAY_ADDRESS, or a user's own RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER, is left as it is)."""
    if OmegaConf.select(cfg, "hydra.launcher._target_") != RAY_LAUNCHER:
        return
    ray = cfg.hydra.launcher.ray
    with read_write(ray), open_dict(ray):
        for part, defaults in RAY_LAUNCHER_DEFAULTS.items():
            if ray.get(part) is None:
                ray[part] = {}
            for key, value in defaults.items():
                if key not in ray[part]:
                    ray[part][key] = value
    address = ray.init.get("address") or os.environ.get("RAY_ADDRESS") or "local"
    # Ray reads the variables when it is imported: later, it is too late.
    if _on_this_machine_only(str(address)) and "ray" not in sys.modules:
        os.environ.setdefault(RAY_LOOPBACK_ENV, "0")
    if "ray" not in sys.modules:
        # Each job's last lines whole (Ray folds lines alike across processes into one), and no
        # colour codes where the output goes to a file.
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        if not sys.stdout.isatty():
            os.environ.setdefault("RAY_COLOR_PREFIX", "0")


def start_the_launchers_ray(cfg: DictConfig) -> None:
    """The Ray launcher's Ray, started (or joined) here as the launcher would (which then finds it
    running), before this process sets its SIGTERM (`stopping`): Ray's driver takes SIGTERM over,
    aborting the sweep's process (exit 134) with every job ending FAILED."""
    if OmegaConf.select(cfg, "hydra.launcher._target_") != RAY_LAUNCHER:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    import ray

    from framework_plugins.ray_runtime.runtime import SYSTEM_CONFIG

    if ray.is_initialized():
        return
    init = OmegaConf.to_container(cfg.hydra.launcher.ray.init, resolve=True)
    assert isinstance(init, dict)
    if "_system_config" not in init and _starts_a_ray(init):
        # Ray starts its workers, the sweep's jobs, at nice 15: beside any other work they got a few
        # percent of a core (a one-job sweep took 134 s, not 14, beside a busy loop per core).
        init["_system_config"] = dict(SYSTEM_CONFIG)
    ray.init(**{str(key): value for key, value in init.items()})
    # The launcher then finds the Ray it would start: "Ray is already running" says someone else's.
    launcher_log = logging.getLogger("hydra_plugins.hydra_ray_launcher._launcher_util")
    launcher_log.addFilter(lambda record: record.getMessage() != "Ray is already running.")


def _starts_a_ray(init: dict[Any, Any]) -> bool:
    """Whether `ray.init(**init)` starts a Ray rather than joining one (RAY_ADDRESS, `ray start`'s)."""
    from ray._private.services import canonicalize_bootstrap_address

    address: Any = init.get("address")  # None too, as ray.init takes it (annotated str)
    try:
        return canonicalize_bootstrap_address(address, init.get("_temp_dir")) is None
    except (ConnectionError, ValueError):  # no Ray at "auto", a malformed address: ray.init says so
        return False


def _on_this_machine_only(address: str) -> bool:
    """A Ray the launcher starts ("local"), or one it joins at a loopback address (127.0.0.1:6379): which
    Ray 2.60 reaches only with RAY_LOOPBACK_ENV set (else it turns 127.0.0.1 into the machine's address)."""
    if address == "local":
        return True
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]") in ("localhost", "::1") or host.startswith("127.")
