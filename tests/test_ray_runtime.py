"""The run's Ray (plugins/ray_runtime/runtime.py): an address is checked to be Ray before the run starts,
what the search asks for is held to what the Ray has, waits on Ray give up at a stop request, and a
local Ray leaves no session directory behind."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from framework import machine
from framework.errors import ConfigError
from framework_plugins.ray_runtime import host
from framework_plugins.ray_runtime import reaper as ray_reaper
from framework_plugins.ray_runtime import runtime as ray_runtime
from tests.conftest import REPO


@contextmanager
def http_server() -> Iterator[str]:
    """host:port of a plain HTTP server on 127.0.0.1: something that listens, and is not Ray."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def http_address() -> Iterator[str]:
    with http_server() as address:
        yield address


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as a run is before it starts Ray (a test session's Ray may be connected)."""
    monkeypatch.delitem(sys.modules, "ray", raising=False)


def configure(**settings: Any) -> None:
    ray_runtime.configure(SimpleNamespace(**settings))


def test_an_address_where_something_else_listens_is_refused_naming_what_answered(http_address: str) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError) as refused:
        configure(address=http_address)
    assert time.monotonic() - started < 5
    message = str(refused.value)
    assert message.startswith(f"ray.address={http_address}: no Ray cluster answers there")
    assert "something else answers there: '<!DOCTYPE HTML>'" in message and "\n" not in message


def test_auto_is_the_address_in_ray_address_and_is_checked_there(
    http_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", http_address)
    with pytest.raises(ConfigError, match=rf"ray.address=auto \({http_address}, from RAY_ADDRESS\): no Ray"):
        configure(address="auto")


def test_auto_with_no_cluster_recorded_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(
        ConfigError, match="ray.address=auto: no Ray cluster to join here .RAY_ADDRESS is unset,"
    ):
        configure(address="auto")


def test_a_ray_head_passes_the_address_check_as_itself_and_as_a_client_address(ray_session: Any) -> None:
    assert ray_runtime.check_address(ray_session.address) == ray_session.address
    assert ray_runtime.check_address(f"ray://{ray_session.address}") == f"ray://{ray_session.address}"


def test_more_cpus_than_the_machine_has_are_refused_naming_ray_num_cpus(no_ray: None) -> None:
    configure()
    asked = machine.cpus() + 1
    with pytest.raises(ConfigError) as refused:
        ray_runtime.check_capacity(
            cpus=asked, gpus=0, memory_bytes=2**20, what="3 self-play workers", keys="agent.workers=3"
        )
    assert str(refused.value) == (
        f"agent.workers=3: 3 self-play workers ask for {asked} CPUs; the local Ray has {machine.cpus()} "
        "CPUs (this machine's CPUs): ask for less, or let the local Ray share its CPUs between them: "
        f"ray.num_cpus={asked}"
    )


def test_ray_num_cpus_lets_a_local_ray_offer_more_cpus_than_the_machine(no_ray: None) -> None:
    configure(num_cpus=machine.cpus() + 8)
    ray_runtime.check_capacity(cpus=machine.cpus() + 8, gpus=0, memory_bytes=0, what="workers", keys="k")
    with pytest.raises(ConfigError, match=rf"has {machine.cpus() + 8} CPUs \(ray.num_cpus="):
        ray_runtime.check_capacity(cpus=machine.cpus() + 9, gpus=0, memory_bytes=0, what="workers", keys="k")


def test_more_memory_than_is_free_is_refused_in_gib(no_ray: None) -> None:
    configure()
    free = host.memory_available_bytes()
    assert 0 < free < 2**50
    with pytest.raises(ConfigError) as refused:
        ray_runtime.check_capacity(
            cpus=1, gpus=0, memory_bytes=free * 2, what="1000 self-play workers", keys="agent.workers=1000"
        )
    message = str(refused.value)
    assert f"ask for {host.gib(free * 2)} of memory; the local Ray has" in message
    assert "of memory free: ask for less" in message and "ray.num_cpus" not in message


def test_gpus_where_none_are_visible_are_refused(no_ray: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    configure()
    with pytest.raises(ConfigError, match="ask for 1 GPUs; the local Ray has 0 GPUs: ask for less"):
        ray_runtime.check_capacity(cpus=1, gpus=1, memory_bytes=0, what="an inference actor", keys="k")


def test_a_connected_ray_is_held_to_its_own_resources(ray_session: Any) -> None:
    configure()
    ray_runtime.check_capacity(cpus=8, gpus=0, memory_bytes=0, what="workers", keys="k")
    with pytest.raises(ConfigError, match="9 CPUs; the connected Ray has 8 CPUs: ask for less, or add"):
        ray_runtime.check_capacity(cpus=9, gpus=0, memory_bytes=0, what="workers", keys="k")


def test_the_actors_of_a_ray_the_run_starts_run_at_its_priority(ray_session: Any) -> None:
    """Not at Ray's nice 15, where another process of the machine leaves them a few percent of a core."""
    import ray

    @ray.remote(num_cpus=0)
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote(), timeout=60) == os.nice(0)


def test_a_local_ray_is_not_sized_past_the_machine_by_what_actors_reserve() -> None:
    # In a process of its own: this test session's Ray would otherwise be the one ensure() returns.
    code = (
        "import time; from types import SimpleNamespace as N\n"
        "from framework_plugins.ray_runtime import runtime as r\n"
        "r.configure(N())\n"
        f"try:\n    r.ensure(min_cpus={machine.cpus() + 0.5})\n"
        "except r.ConfigError as e:\n    print(e, r.owned(), r.sys.modules['ray'].is_initialized())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.stdout.strip() == (
        f"Ray actors that reserve {machine.cpus() + 0.5:g} CPUs together cannot all be placed: the local "
        f"Ray has {machine.cpus()} (this machine's CPUs); ask for fewer, or let it share its CPUs between "
        f"them: ray.num_cpus={machine.cpus() + 1} False False"
    ), done.stderr[-3000:]


def test_a_sigterm_while_a_local_ray_starts_is_the_runs_and_leaves_no_ray_behind() -> None:
    """ray.init sets its own SIGTERM handler (exit 15) first thing: a SIGTERM that lands while the
    node starts goes to the run's handler (KILLED with a checkpoint, as Ctrl-C), and what had
    started of that Ray (its processes, its session directory) ends with the interrupted start."""
    code = textwrap.dedent(
        """
        import os, signal, threading, time
        from types import SimpleNamespace
        from framework_plugins.ray_runtime import reaper, runtime
        runtime.configure(SimpleNamespace())
        stop = threading.Event()
        def run_handler(signum, frame):  # as framework.interrupts.sigterm_as_interrupt's
            stop.set()
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, run_handler)
        sessions = set()
        def strike():  # once Ray's handler is in place and its node's first processes run
            deadline = time.monotonic() + 100
            while time.monotonic() < deadline:
                found = reaper.ray_descendants(os.getpid())
                if signal.getsignal(signal.SIGTERM) is not run_handler and found:
                    sessions.update(reaper.session_dirs(found))
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
                time.sleep(0.005)
        threading.Thread(target=strike, daemon=True).start()
        try:
            runtime.ensure()
            print("started")
        except KeyboardInterrupt:
            alive = reaper.ray_descendants(os.getpid())
            print("interrupted", stop.is_set(), signal.getsignal(signal.SIGTERM) is run_handler,
                  runtime.sys.modules["ray"].is_initialized(), sorted(alive), bool(sessions),
                  [s for s in sessions if os.path.exists(s)])
        runtime.shutdown()
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=180)
    assert done.returncode == 0 and done.stdout.strip() == "interrupted True True False [] True []", (
        done.stdout + done.stderr[-3000:]
    )


def test_removing_a_session_directory_leaves_other_sessions_and_their_latest_link(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "session_2026_1", tmp_path / "session_2026_2"
    for session in (ours, theirs):
        (session / "logs").mkdir(parents=True)
    (tmp_path / "session_latest").symlink_to(theirs)
    ray_reaper.remove_session(str(ours))
    ray_reaper.remove_session(str(tmp_path / "session_latest"))  # never through the link
    ray_reaper.remove_session(str(tmp_path))  # nor anything not a session
    assert not ours.exists() and (theirs / "logs").is_dir()
    assert (tmp_path / "session_latest").resolve() == theirs
    ray_reaper.remove_session(str(theirs))
    assert not (tmp_path / "session_latest").is_symlink() and list(tmp_path.iterdir()) == []


def test_a_session_directory_written_into_as_it_is_removed_is_removed_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "session_2026_1"
    (session / "logs").mkdir(parents=True)
    removals: list[str] = []
    rmtree = ray_reaper.shutil.rmtree

    def racing(path: str, ignore_errors: bool = False) -> None:
        rmtree(path, ignore_errors=ignore_errors)
        if not removals:  # a Ray process on its way out writes its last file as the folder goes
            Path(path).mkdir()
            (Path(path) / "raylet.out").write_text("exiting")
        removals.append(str(path))

    monkeypatch.setattr(ray_reaper.shutil, "rmtree", racing)
    ray_reaper.remove_session(str(session))
    assert not session.exists() and len(removals) == 2


def test_a_process_that_exits_at_once_has_its_ray_ended_by_the_reaper_without_the_grace_period() -> None:
    owner = textwrap.dedent(
        """
        import os, subprocess, sys
        from framework_plugins.ray_runtime import reaper as ray_reaper
        reaper = ray_reaper.watch()
        # A process named as Ray's workers are; its output not ours (run() would wait for its end).
        ray = subprocess.Popen(["bash", "-c", 'exec -a "ray::Worker" sleep 60'],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(ray.pid, flush=True)
        import time; time.sleep(ray_reaper.INTERVAL_S + 1)  # the reaper has seen it
        ray_reaper.end_now(reaper)
        os._exit(0)  # no ray.shutdown(), no wait for the reaper
        """
    )
    process = subprocess.run([sys.executable, "-c", owner], capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, process.stderr
    pid = int(process.stdout.split()[0])
    ended = time.monotonic()
    while (stat := ray_reaper._stat(pid)) is not None and stat[2] != "Z":  # gone, or ended (a zombie)
        assert time.monotonic() - ended < ray_reaper.GRACE_S - 1, "the reaper waited its grace period"
        time.sleep(0.05)


def test_each_local_ray_gets_its_own_system_config() -> None:
    """ray.init adds its session's spilling directory to the `_system_config` it is given: the next Ray
    this process started (a sweep's next job) spilled into the first one's session, with a warning."""
    given: list[dict[str, Any]] = []

    def init(**kwargs: Any) -> None:
        config = kwargs["_system_config"]
        given.append(dict(config))
        config["object_spilling_config"] = '{"type": "filesystem", "params": {"directory_path": "/s1"}}'

    for _ in range(2):
        ray_runtime._ray_init_local(SimpleNamespace(init=init), num_cpus=1, num_gpus=0)
    assert given[1] == given[0] == ray_runtime.SYSTEM_CONFIG and "object_spilling_config" not in given[1]


def test_a_restarted_actors_warning_names_the_setting_that_bounds_its_restarts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A self-play worker's restarts were said as `search.max_restarts`, which sets the inference
    actors'; `agent.worker_max_restarts` sets the workers'."""
    from framework_plugins.ray_runtime.restarts import Incarnations

    caplog.set_level("WARNING")
    watched = Incarnations(
        "self-play worker", ["w0"], max_restarts=3, timeout_s=1.0, setting="agent.worker_max_restarts"
    )
    assert watched.note(0, {"incarnation": 2, "pid": 42})
    assert caplog.records[-1].getMessage() == (
        "self-play worker w0 died; Ray restarted it (pid 42 now; restart 1, of agent.worker_max_restarts=3)"
    )
