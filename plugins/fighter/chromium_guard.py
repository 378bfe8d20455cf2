"""Ends a headless Chromium once the trainer that started it is gone, however the trainer ended.

    python chromium_guard.py PROFILE -- CHROMIUM [ARGS...]

The trainer starts this guard (by its path: it imports nothing but the standard library), and the
guard starts Chromium in a process group of its own, writing its pid to PROFILE/chromium.pid.
When the guard's standard input closes, because the trainer closed it or died (a SIGKILL or a
crash closes it too), the guard ends Chromium's process group (SIGTERM, then SIGKILL) and
removes PROFILE. When Chromium ends by itself, the guard writes its exit status to
PROFILE/chromium.exit (a negative number: the signal that ended it) and ends what Chromium left
running; the trainer reads why from there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PID_FILE = "chromium.pid"
EXIT_FILE = "chromium.exit"
#: Seconds Chromium's processes get to end after SIGTERM, and after SIGKILL.
GRACE_S = 5.0


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of someone else's took the number: ours are gone
        return False
    return True


def end_group(group: int, grace_s: float = GRACE_S) -> None:
    """End every process of process group `group`: SIGTERM, then SIGKILL for what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not group_alive(group):
                return
            time.sleep(0.05)


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: chromium_guard.py PROFILE -- CHROMIUM [ARGS...]", file=sys.stderr)
        return 2
    profile, command = Path(argv[0]), argv[2:]
    chromium = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
    write_atomically(profile / PID_FILE, str(chromium.pid))

    def watch() -> None:
        code = chromium.wait()
        with contextlib.suppress(OSError):  # the profile may be going already
            write_atomically(profile / EXIT_FILE, str(code))
        end_group(chromium.pid)  # its renderers and crash handlers

    threading.Thread(target=watch, daemon=True).start()
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(4096):  # nothing is sent: this waits for the trainer to go
            pass
    end_group(chromium.pid)
    shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
