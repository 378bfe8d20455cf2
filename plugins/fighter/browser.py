"""Opening the game page: the user's own browser, or a headless Chromium that we watch."""

from __future__ import annotations

import shutil
import subprocess
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
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    # WebRTC between two processes of this machine: offer loopback candidates, unmasked.
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
#: Redraws per second of the game page in a headless browser: nobody looks at it, and drawing at
#: display rate costs a 2-core machine about a fifth of its steps/s.
HEADLESS_FPS = 2


class HeadlessChromium:
    """A headless Chromium showing `url`, with its own fresh profile; `close` ends it."""

    def __init__(self, url: str, executable: str | None = None, fps: int = HEADLESS_FPS) -> None:
        found = executable or next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
        if found is None:
            raise FileNotFoundError(
                f"No Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); install Debian's `chromium`, "
                "or use env.headless=false to open the page in your own browser"
            )
        self.profile = Path(tempfile.mkdtemp(prefix="framework-chromium-"))
        self.log = open(self.profile / "chromium.log", "wb")  # noqa: SIM115 - held for the process's life
        self.process = subprocess.Popen(
            [found, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", _with_fps(url, fps)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            self.log.flush()
            tail = (self.profile / "chromium.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Chromium exited with code {code} before the game connected:\n{tail}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def open_in_users_browser(url: str) -> None:
    print(f"Open the fighter game to start training: {url}", flush=True)
    webbrowser.open(url)


def _with_fps(url: str, fps: int) -> str:
    """The game page's redraw rate as a query parameter (0: display rate)."""
    if fps <= 0:
        return url
    return f"{url}{'&' if '?' in url else '?'}fps={fps}"
