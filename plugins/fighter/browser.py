"""Opening the game page: the user's own browser, or a headless Chromium that we watch."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import webbrowser
from pathlib import Path

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
#: Redraws per second of the game page in a headless browser, one every 5 s: nobody looks at it
#: (it has no debugging port), and each redraw of a software-rendered page costs the steps it
#: answers: on a 2-core machine, display rate cost a fifth of the steps/s, 2 a second a tenth.
HEADLESS_FPS = 0.2


class HeadlessChromium:
    """A headless Chromium showing `url`, with its own fresh profile; `close` ends it."""

    def __init__(self, url: str, executable: str | None = None, fps: float = HEADLESS_FPS) -> None:
        found = executable or next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
        if found is None:
            raise FileNotFoundError(
                f"No Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); install Debian's `chromium`, "
                "or use env.headless=false to open the page in your own browser"
            )
        self.profile = Path(tempfile.mkdtemp(prefix="framework-chromium-"))
        self.log = open(self.profile / "chromium.log", "wb")  # noqa: SIM115 - held for the process's life
        # Chromium's own temporary files (its singleton socket's directory) go inside the profile,
        # so that removing the profile removes them too.
        (self.profile / "tmp").mkdir()
        self.process = subprocess.Popen(
            [found, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", _with_fps(url, fps)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "TMPDIR": str(self.profile / "tmp")},
        )

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            self.log.flush()
            tail = (self.profile / "chromium.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Chromium exited with code {code} before the game connected:\n{tail}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """End Chromium and every process it started (renderers, crash handlers: its own process
        group, since it was started in a session of its own), then remove its profile."""
        group = self.process.pid
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, sig)
            try:
                self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(group):
                break
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


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
