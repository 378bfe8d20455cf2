"""Opening the game page: the user's own browser, or a headless Chromium that we watch."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import webbrowser
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from framework_plugins.web.token_logs import redact

from . import chromium_guard

#: Flags for a headless Chromium on a machine without a display or network.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    # WebRTC between two processes of this machine: offer loopback candidates, unmasked.
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
NO_CHROMIUM = (
    f"No Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); install Debian's `chromium`, or use "
    "env.headless=false to open the page in your own browser"
)


def find_chromium() -> str | None:
    """The Chromium on PATH a headless page runs in (None: none is)."""
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


#: Redraws per second of the game page in a headless browser, one every 5 s: nobody looks at it
#: (it has no debugging port), and each redraw of a software-rendered page costs the steps it
#: answers: on a 2-core machine, display rate cost a fifth of the steps/s, 2 a second a tenth.
HEADLESS_FPS = 0.2
#: Headless Chromiums of this process on each CPU they were pinned to.
_PINNED: collections.Counter[int] = collections.Counter()


def chromium_cpu() -> int | None:
    """The CPU a new headless Chromium runs on: of the CPUs this process may use, the one with the
    fewest of our Chromiums, the highest-numbered first; None with a single CPU, or where CPU
    affinity cannot be set (not Linux).

    Why one CPU: a data-channel message crosses four of Chromium's threads and two of its
    processes each way (network service, the renderer's IO, WebRTC network and main threads).
    Spread over every CPU, each hand-over wakes a thread on another CPU, the trainer's among
    them; on one CPU the hand-overs are cheap and the trainer keeps the others to itself. On a
    2-core machine one arena steps ~1.2x faster so (benchmarks/fighter_transport.py --unpinned).
    """
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0), reverse=True)
    if len(allowed) < 2:
        return None
    return min(allowed, key=lambda cpu: _PINNED[cpu])


@contextlib.contextmanager
def _children_on(cpu: int | None) -> Iterator[None]:
    """Processes started in this block run on `cpu` (None: anywhere), and so do theirs.

    A child inherits the affinity of the thread that starts it, so this thread is pinned for the
    block and then let go again: no `preexec_fn`, which is unsafe in a process with threads.
    """
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)  # pid 0: this thread
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class HeadlessChromium:
    """A headless Chromium showing `url`, with its own fresh profile; `close` ends it.

    Chromium runs under a guard process (`chromium_guard.py`) that ends it and removes its
    profile once this process is gone, even after a SIGKILL or a crash, when no `close` ran.
    `pin`: Chromium and every process it starts run on one CPU (`chromium_cpu`).
    """

    def __init__(
        self, url: str, executable: str | None = None, fps: float = HEADLESS_FPS, *, pin: bool = True
    ) -> None:
        found = executable or find_chromium()
        if found is None:
            raise FileNotFoundError(NO_CHROMIUM)
        self._token = parse_qs(urlsplit(url).query).get("token", [""])[0]
        """The page's token, kept out of what is said of Chromium's log (it quotes the page's address)."""
        self.profile = Path(tempfile.mkdtemp(prefix="framework-chromium-"))
        self.log = open(self.profile / "chromium.log", "wb")  # noqa: SIM115 - held for the process's life
        # Chromium's own temporary files (its singleton socket's directory) go inside the profile,
        # so that removing the profile removes them too.
        (self.profile / "tmp").mkdir()
        self.cpu = chromium_cpu() if pin else None
        """The CPU Chromium runs on (None: any)."""
        # Chromium opens a page of its private profile that goes on to the address: a command line
        # is every local user's to read (/proc/PID/cmdline), and the address holds the token.
        start = self.profile / "start.html"
        start.write_text(f"<script>location.replace({json.dumps(_with_fps(url, fps))})</script>")
        command = [found, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", start.as_uri()]
        guard = Path(__file__).with_name("chromium_guard.py")
        with _children_on(self.cpu):
            self.guard = subprocess.Popen(
                [sys.executable, str(guard), str(self.profile), "--", *command],
                stdout=self.log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE,  # its end: this process is gone
                start_new_session=True,  # Ctrl-C in a terminal stops the trainer, which then ends it
                env={**os.environ, "TMPDIR": str(self.profile / "tmp")},
            )
        if self.cpu is not None:
            _PINNED[self.cpu] += 1
        self._pid: int | None = None

    @property
    def pid(self) -> int | None:
        """Chromium's pid, also its process group's (None until the guard has started it)."""
        if self._pid is None:
            with contextlib.suppress(OSError, ValueError):
                self._pid = int((self.profile / chromium_guard.PID_FILE).read_text())
        return self._pid

    @property
    def returncode(self) -> int | None:
        """How Chromium ended (a negative number: the signal that ended it); None while it runs."""
        with contextlib.suppress(OSError, ValueError):
            return int((self.profile / chromium_guard.EXIT_FILE).read_text())
        return self.guard.poll()  # the guard itself ended: Chromium went with it

    def check_alive(self) -> None:
        code = self.returncode
        if code is not None:
            self.log.flush()
            tail = redact((self.profile / "chromium.log").read_text(errors="replace")[-2000:], [self._token])
            raise RuntimeError(f"Chromium exited with code {code} before the game connected:\n{tail}")

    def alive(self) -> bool:
        return self.returncode is None

    def close(self) -> None:
        """End Chromium and every process it started (renderers, crash handlers: its own process
        group), then remove its profile: the guard does it once its standard input closes."""
        pid = self.pid
        if self.guard.stdin is not None:
            with contextlib.suppress(OSError):
                self.guard.stdin.close()
        try:
            self.guard.wait(timeout=3 * chromium_guard.GRACE_S)
        except subprocess.TimeoutExpired:
            self.guard.kill()
            self.guard.wait(timeout=5)
        if pid is not None and chromium_guard.group_alive(pid):  # the guard was killed before it
            chromium_guard.end_group(pid)
        if self.cpu is not None:
            _PINNED[self.cpu] -= 1
            self.cpu = None
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def has_display() -> bool:
    """Whether a browser can be opened here (webbrowser.open silently does nothing without one)."""
    if sys.platform != "linux":
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_in_users_browser(url: str, public_url: str, *, open_browser: bool = True) -> None:
    """Show the user the page's address (the one place its token is printed: never logged) and
    open it in their browser when asked and there is a display."""
    opened = open_browser and has_display() and webbrowser.open(url)
    how = "opened in your browser" if opened else "open it in a browser on this machine"
    print(f"The fighter game, waiting for its page ({how}): {url}", flush=True)
    if open_browser and not opened:
        print(f"  (no browser could be opened here; {public_url} needs the token above)", flush=True)


def _with_fps(url: str, fps: float) -> str:
    """The game page's redraw rate as a query parameter (0: display rate)."""
    if fps <= 0:
        return url
    return f"{url}{'&' if '?' in url else '?'}fps={fps:g}"
