"""The fighter's page server keeps its per-run token out of every log line and stderr, whatever
requests carry it (cut short, percent-encoded, malformed), and out of what is said of a Chromium that
failed (its log quotes the page's address)."""

from __future__ import annotations

import http.server
import logging
import os
import re
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from framework_plugins.fighter.browser import HeadlessChromium
from framework_plugins.fighter.webrtc import WebRTCClient
from tests.conftest import descendants, require_tool
from tests.token_leaks import exchange, hostile_requests, percent_encoded, token_traces


def test_no_part_of_the_token_in_any_encoding_reaches_a_log_line_or_stderr(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PYTHONASYNCIODEBUG", "1")  # aiohttp's request log says more in debug mode
    caplog.set_level(logging.DEBUG)
    client = WebRTCClient(host="127.0.0.1")
    token = client.token
    try:
        for data in hostile_requests("/", token):
            answer = exchange(client.port, data)
            assert not answer or re.match(rb"HTTP/1\.[01] 4\d\d ", answer), answer[:200]
        for form in (token, percent_encoded(token, every=2)):  # the page still opens with its token
            request = f"GET /?token={form} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            answer = exchange(client.port, request.encode(), half_close=False)
            assert answer.startswith(b"HTTP/1.1 200 ") and b"<html" in answer.lower(), answer[:200]
        refused = b"GET /?token=wrong HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        wrong = exchange(client.port, refused, half_close=False)
        assert wrong.startswith(b"HTTP/1.1 403 ")
    finally:
        client.close()
    said = caplog.text + capfd.readouterr().err
    assert "LineTooLong" in said and "InvalidURLError" in said  # logged, one line each, redacted
    assert "Traceback" not in said
    assert not [line for line in said.splitlines() if token_traces(line, token)]


def test_what_is_said_of_a_chromium_that_exited_quotes_no_part_of_the_token(tmp_path: Path) -> None:
    """A 'Chromium' that prints the address it was given, as a console message of Chromium's does,
    then exits: the error that reports its log's tail has the token redacted."""
    token = "a-token-of-the-page_0123"
    fake = tmp_path / "chromium"
    # It is given a page of its profile that goes on to the address: it prints that page.
    fake.write_text(
        '#!/bin/sh\nfor arg; do case $arg in file://*) echo "[CONSOLE] source: $(cat "${arg#file://}")";; '
        "esac; done\nexit 3\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    browser = HeadlessChromium(f"http://127.0.0.1:9/?token={token}", executable=str(fake), pin=False)
    try:
        deadline = time.monotonic() + 60
        while browser.alive():
            assert time.monotonic() < deadline, "the fake Chromium never exited"
            time.sleep(0.05)
        with pytest.raises(RuntimeError) as exited:
            browser.check_alive()
    finally:
        browser.close()
    message = str(exited.value)
    assert "exited with code 3" in message and '("http://127.0.0.1:9/?token=<token>' in message, message
    assert token_traces(message, token) == []


def test_chromium_opens_the_page_with_its_token_that_no_command_line_shows(tmp_path: Path) -> None:
    """Chromium was given the address, token and all, on its command line: every local user's to read
    in /proc. It now opens a page of its private profile that goes on to the address."""
    chromium = require_tool("chromium")
    asked: list[str] = []

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>the page</html>")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = "a-token-of-the-page_4567"
    browser = HeadlessChromium(f"http://127.0.0.1:{server.server_port}/?token={token}", chromium, pin=False)
    try:
        deadline = time.monotonic() + 90
        while not any(f"token={token}" in path for path in asked):
            assert time.monotonic() < deadline, f"Chromium never asked for the page: {asked}"
            browser.check_alive()
            time.sleep(0.1)
        assert browser.pid is not None
        group = {browser.pid, *descendants(browser.pid), browser.guard.pid}
        lines = {
            pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in group if Path(f"/proc/{pid}").exists()
        }
        assert len(lines) >= 2 and not [pid for pid, line in lines.items() if token.encode() in line], lines
        assert stat.S_IMODE(browser.profile.stat().st_mode) == 0o700  # the page that holds it: ours alone
    finally:
        browser.close()
        server.shutdown()


def test_what_a_game_client_needs_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    """A fixed port another server holds, an address not of this machine, no Chromium for a
    headless page: a ConfigError naming the setting, before anything starts."""
    import os
    import socket

    from framework.errors import ConfigError
    from framework_plugins.fighter.config import FighterConfig
    from framework_plugins.fighter.plugin import Fighter

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"^env.port={port}: 127.0.0.1:{port} is in use \(another run"):
            Fighter(FighterConfig(transport="python", port=port))
    with pytest.raises(ConfigError, match=r"^env.port=6000: browsers refuse to load a page from port 6000"):
        Fighter(FighterConfig(transport="browser", port=6000))  # the page would never load
    with pytest.raises(ConfigError, match=r"^env.host='nohost.invalid' is not an IP address"):
        Fighter(FighterConfig(transport="python", host="nohost.invalid"))
    with pytest.raises(ConfigError, match=r"^env.host=192.0.2.1: 192.0.2.1:0 cannot be served here"):
        Fighter(FighterConfig(transport="browser", host="192.0.2.1"))
    path = os.environ["PATH"]
    os.environ["PATH"] = str(tmp_path)  # no Chromium on it
    try:
        with pytest.raises(ConfigError, match=r"^No Chromium found .* or use env.headless=false"):
            Fighter(FighterConfig(transport="browser", headless=True))
    finally:
        os.environ["PATH"] = path
    Fighter(FighterConfig(transport="inprocess", host="nohost.invalid"))  # no page: nothing to serve
    for transport in ("python", "browser"):  # a client's messages hold at most 256 arenas
        with pytest.raises(
            ConfigError,
            match=rf"^env.n_envs=300: a game client plays at most 256 arenas \(env.transport={transport}\)",
        ):
            Fighter(FighterConfig(transport=transport, n_envs=300))
    Fighter(FighterConfig(transport="inprocess", n_envs=300))


def test_a_page_that_never_connects_ends_the_run_in_one_message() -> None:
    """Not a TimeoutError's traceback: the transport's ClientLost, which a run says in a line."""
    from framework.errors import ExplainedError
    from framework_plugins.fighter.transports import WebRTCTransport

    with pytest.raises(ExplainedError, match=r"No game client connected to http://127.0.0.1:\d+/ within 1 s"):
        WebRTCTransport("browser", headless=False, open_browser=False, connect_timeout_s=1)


def test_the_python_client_given_a_wrong_address_says_so_in_one_line_without_the_token() -> None:
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/?token=s3cr3tt0k3n"  # the page's address, nobody serving it
    env = {**os.environ, "FRAMEWORK_FIGHTER_TOKEN": "s3cr3tt0k3n"}
    r = subprocess.run(
        [sys.executable, "-m", "framework_plugins.fighter.python_peer", url],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "no trainer's signaling answers there" in r.stderr and "address + /offer" in r.stderr
    assert "s3cr3tt0k3n" not in r.stderr + r.stdout
