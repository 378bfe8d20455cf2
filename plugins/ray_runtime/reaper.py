"""Stops the Ray processes a run started when the run's process dies without stopping them.

A run that starts a local Ray stops it on every exit it sees (the end, Ctrl-C, SIGTERM, an
error); a process killed outright (SIGKILL, the OOM killer) sees none, and Ray's agents outlive
it. `watch()` starts this module as a small process in a session of its own, which notes the
Ray processes under the run (by their command lines: Ray's binaries and `ray::` workers) every
`INTERVAL_S`; when the run's pipe to it closes, it waits `GRACE_S` for them to end by themselves
(none after `end_now`),
then ends those still there (each checked by its start time, so that a reused pid is left alone),
and removes the local Ray's session directory: the one the run names on the pipe
(`note_session`), and any its Ray processes were started with (`--session-dir=`, which covers a
run killed while Ray was starting). Nothing else under the run is touched: the tracking process
ends its own run, and the session directories of other Rays on this machine stay.

    python -m framework_plugins.ray_runtime.reaper OWNER_PID  (started by watch(); reads stdin to EOF)
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

INTERVAL_S = 2.0
GRACE_S = 5.0


def watch() -> subprocess.Popen[bytes]:
    """Start the reaper for this process; keep the returned handle (its stdin is the pipe) open."""
    return subprocess.Popen(
        [sys.executable, "-m", "framework_plugins.ray_runtime.reaper", str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """The run stopped its Ray itself: close the pipe (the reaper finds nothing left and exits)."""
    if process is None:
        return
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=GRACE_S + 10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def end_now(process: subprocess.Popen[bytes] | None) -> None:
    """The run exits at once without stopping its Ray: the reaper ends Ray's processes as soon as the
    pipe closes, with no grace period (it goes on after this process)."""
    if process is None or process.stdin is None:
        return
    with contextlib.suppress(OSError):
        process.stdin.write(b"now\n")
        process.stdin.flush()


def note_session(process: subprocess.Popen[bytes] | None, session_dir: str | None) -> None:
    """Tell the reaper the session directory of the Ray it watches, to remove once that Ray is gone."""
    if process is None or process.stdin is None or not session_dir:
        return
    try:
        process.stdin.write(f"session {session_dir}\n".encode())
        process.stdin.flush()
    except OSError:  # the reaper is gone: shutdown removes the directory itself
        return


#: How long removing a session directory tries again while something still writes into it.
REMOVE_S = 3.0


def remove_session(session_dir: str | None) -> None:
    """Remove a Ray session directory (`<ray temp>/session_*`), and `session_latest` where it
    points there; anything else is left alone."""
    if not session_dir:
        return
    path = Path(session_dir)
    if not path.name.startswith("session_") or path.name == "session_latest" or path.is_symlink():
        return
    latest = path.parent / "session_latest"
    if latest.is_symlink() and os.path.realpath(latest) == os.path.realpath(path):
        latest.unlink(missing_ok=True)
    # A Ray process still on its way out may write into it (a socket, a last log) while it goes.
    deadline = time.monotonic() + REMOVE_S
    shutil.rmtree(path, ignore_errors=True)
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
        shutil.rmtree(path, ignore_errors=True)


def session_dirs(pids: Iterable[int]) -> set[str]:
    """The session directories that these Ray processes were started with."""
    found = set()
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for arg in args:
            for flag in (b"--session-dir=", b"--session_dir="):
                if arg.startswith(flag):
                    found.add(os.fsdecode(arg[len(flag) :]))
    return found


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time, state) of a process, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19]), fields[0]


def _is_ray(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return cmdline.startswith(b"ray::") or b"/site-packages/ray/" in cmdline or b"/ray/core/src/" in cmdline


def ray_descendants(owner: int) -> dict[int, int]:
    """The Ray processes under `owner`: pid → start time."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is not None:
            children.setdefault(stat[0], []).append(int(entry))
            started[int(entry)] = stat[1]
    found: dict[int, int] = {}
    todo = [owner]
    while todo:
        for child in children.get(todo.pop(), []):
            if child != os.getpid() and child not in found:
                todo.append(child)
                if _is_ray(child):
                    found[child] = started[child]
    return found


def _alive(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == started and stat[2] != "Z"


def main(owner: int) -> None:
    seen: dict[int, int] = {}
    sessions: set[str] = set()
    said = b""
    grace = GRACE_S  # none once the run said `now`: it is exiting without stopping its Ray
    while True:
        ready, _, _ = select.select([sys.stdin.buffer], [], [], INTERVAL_S)
        if ready:
            chunk = os.read(sys.stdin.fileno(), 4096)
            if not chunk:
                break  # the run's end of the pipe closed: it stopped, or died
            said += chunk
            *lines, said = said.split(b"\n")
            sessions.update(os.fsdecode(line[8:]) for line in lines if line.startswith(b"session "))
            grace = 0.0 if b"now" in lines else grace
        found = ray_descendants(owner)
        seen.update(found)
        sessions.update(session_dirs(found))
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in seen.items()):
        time.sleep(0.2)
    end(seen)
    for session in sessions:
        remove_session(session)


def end(processes: dict[int, int]) -> None:
    """End these processes (pid → start time; a pid taken since by another is left): SIGTERM, then
    SIGKILL for those still there 2 s later."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [p for p, s in processes.items() if _alive(p, s)]
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                continue
        if not left:
            break
        time.sleep(2.0)


if __name__ == "__main__":
    main(int(sys.argv[1]))


def end_this_process_ray() -> None:
    """Shut down the Ray this process started as its head (the Ray launcher's, `hydra/launcher=ray`
    without an address), and remove its session directory, which Ray leaves in its temp folder
    (`/tmp/ray/session_*`) at every start; a Ray this process joined is left alone."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return
    node = getattr(ray._private.worker, "_global_node", None)
    if node is None or not getattr(node, "head", False):
        return
    session = node.get_session_dir_path()
    ray.shutdown()
    remove_session(session)
