"""env.signaling=peerjs: the game client reaches the trainer through a real PeerJS server (npm `peer`)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from framework_plugins.fighter import python_peer
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.peerjs import PeerJSError, PeerJSServer, PeerJSSocket, check_server_message
from framework_plugins.fighter.protocol import ProtocolError
from framework_plugins.fighter.transports import ClientLost, WebRTCTransport
from tests.conftest import free_port, require_tool, run_cli
from tests.fighter.transport_checks import (
    assert_a_lost_peer_is_started_anew,
    assert_passes_env_checkers,
    assert_plays_like_the_twin,
    wait_for,
)

pytestmark = pytest.mark.slow

SERVER_DIR = Path(__file__).parent / "peerjs_server"
SERVER_BIN = SERVER_DIR / "node_modules" / "peer" / "dist" / "bin" / "peerjs.js"
PATH = "/signal/"
KEY = "framework-test"


def _install_peer_server() -> None:
    """The `peer` package from the npm registry, pinned by the committed package-lock.json."""
    if SERVER_BIN.is_file():
        return
    npm = require_tool("npm")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=SERVER_DIR, check=True, timeout=300)


def start_peer_server(port: int) -> subprocess.Popen[bytes]:
    """A PeerJS server on 127.0.0.1:`port`, listening."""
    _install_peer_server()
    process = subprocess.Popen(
        [
            require_tool("node"),
            str(SERVER_BIN),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--path",
            PATH,
            "--key",
            KEY,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, f"the PeerJS server exited: {process.stderr.read().decode()[-2000:]}"  # type: ignore[union-attr]
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert time.monotonic() < deadline, "the PeerJS server did not start listening within 30 s"
        time.sleep(0.1)
    return process


@pytest.fixture(scope="module")
def peerjs_server() -> Iterator[PeerJSServer]:
    port = free_port()
    process = start_peer_server(port)
    yield PeerJSServer(f"http://127.0.0.1:{port}{PATH}", KEY)
    process.kill()  # it waits for its clients on SIGTERM
    process.wait(timeout=10)


def test_a_lost_peerjs_server_is_said_once_used_again_when_back_and_named_when_no_client_can_connect(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    port = free_port()
    server = start_peer_server(port)
    t = WebRTCTransport(
        "python", connect_timeout_s=4, peerjs=PeerJSServer(f"http://127.0.0.1:{port}{PATH}", KEY)
    )
    try:
        server.kill()
        server.wait(timeout=10)
        wait_for(lambda: bool(t.connection.signaling_problem), 10, "noticing the server's loss")
        time.sleep(2.5)  # registering again all along
        said = [r.getMessage() for r in caplog.records if "PeerJS server" in r.getMessage()]
        assert said[0].startswith("lost the PeerJS server") and len(said) == 2, said  # not once a second
        server = start_peer_server(port)  # back at its address: registered at again, clients reach us
        wait_for(lambda: not t.connection.signaling_problem, 10, "the registration")
        assert_a_lost_peer_is_started_anew(t)
        env = FightingEnv(transport=t, reconnect_timeout_s=30)
        env.reset(seed=0)
        server.kill()
        server.wait(timeout=10)
        assert not env.step(0)[3]  # the peer plays on: the data channel needs no server
        wait_for(lambda: bool(t.connection.signaling_problem), 10, "noticing the server's loss")
        assert t.process is not None
        t.process.kill()
        with pytest.raises(
            # Either the new peer or our own registration finds the server gone first: named either way.
            ClientLost,
            match=rf"(Cannot register at|lost) the PeerJS server http://127.0.0.1:{port}",
        ):
            env.step(0)
    finally:
        t.close()
        server.kill()
        server.wait(timeout=10)


@pytest.mark.parametrize(("client", "opponent"), [("python", "random"), ("browser", "aggressive")])
def test_the_game_over_peerjs_passes_the_env_checkers_and_plays_like_the_twin(
    peerjs_server: PeerJSServer, client: str, opponent: str
) -> None:
    if client == "browser":
        require_tool("chromium")
    t = WebRTCTransport(client, connect_timeout_s=60, peerjs=peerjs_server)
    try:
        assert t.connection.client_kind == client
        assert f"peer={t.connection.peer_id}" in t.url
        assert_passes_env_checkers(t)
        actions = np.random.default_rng(4).integers(0, 9, 150)
        assert_plays_like_the_twin(t, opponent=opponent, seed=6, actions=actions)
    finally:
        t.close()


def test_a_new_peer_reconnects_through_peerjs(peerjs_server: PeerJSServer) -> None:
    t = WebRTCTransport("python", connect_timeout_s=30, peerjs=peerjs_server)
    try:
        assert t.connection.client_args[:2] == ["--peerjs", peerjs_server.url]
        assert_a_lost_peer_is_started_anew(t)
    finally:
        t.close()


def test_an_offer_without_the_token_is_refused(peerjs_server: PeerJSServer) -> None:
    from framework_plugins.fighter.webrtc import WebRTCClient

    client = WebRTCClient(peerjs=peerjs_server)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "framework_plugins.fighter.python_peer", *client.client_args],
            env={**os.environ, python_peer.TOKEN_VARIABLE: "wrong"},
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode != 0
        assert "wrong or missing token" in r.stderr
        assert not client.connected.is_set()
    finally:
        client.close()


def test_an_unreachable_peerjs_server_is_a_clear_error_in_seconds() -> None:
    from framework_plugins.fighter.webrtc import WebRTCClient

    url = f"http://127.0.0.1:{free_port()}/"
    t0 = time.monotonic()
    with pytest.raises(PeerJSError, match=f"Cannot register at the PeerJS server {url}"):
        WebRTCClient(peerjs=PeerJSServer(url), signaling_timeout_s=5)
    assert time.monotonic() - t0 < 10


def test_a_taken_peer_id_is_a_clear_error(peerjs_server: PeerJSServer) -> None:
    async def register_twice() -> None:
        first = PeerJSSocket(peerjs_server, "framework-trainer-same")
        await first.open(10)
        try:
            await PeerJSSocket(peerjs_server, "framework-trainer-same").open(10)
        finally:
            await first.close()

    with pytest.raises(PeerJSError, match="refused id framework-trainer-same: ID-TAKEN"):
        asyncio.run(register_twice())


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("x" * 70_000, "exceeds the 65536-byte limit"),
        ("{not json", "malformed JSON PeerJS message"),
        ('{"type": "GOSSIP"}', "unexpected PeerJS message type 'GOSSIP'"),
        ('{"type": "OFFER", "src": "a", "payload": {"connectionId": "c", "sdp": "v"}}', "needs payload.sdp"),
        ('{"type": "CANDIDATE", "src": "a", "payload": {"connectionId": "c"}}', "needs payload.candidate"),
        ('{"type": "ANSWER", "payload": {"connectionId": "c"}}', "needs a string src"),
        ('{"type": "OPEN", "payload": []}', "payload must be an object"),
    ],
)
def test_malformed_signaling_messages_are_rejected(raw: str, error: str) -> None:
    with pytest.raises(ProtocolError, match=error):
        check_server_message(raw)


def test_bad_peerjs_settings_name_the_value() -> None:
    from framework_plugins.fighter.plugin import Fighter, FighterConfig

    with pytest.raises(ValueError, match="env.peerjs_url='ws:/nowhere' is not valid"):
        Fighter(FighterConfig(signaling="peerjs", peerjs_url="ws:/nowhere"))
    with pytest.raises(ValueError, match="env.signaling='pigeon' is not valid; choose one of builtin, pe"):
        Fighter(FighterConfig(signaling="pigeon"))


def test_ppo_trains_over_peerjs_through_the_cli(peerjs_server: PeerJSServer, tmp_path: Path) -> None:
    r = run_cli(
        "env=fighter", "env.transport=python", "env.signaling=peerjs", "env.n_envs=2",
        f"env.peerjs_url={peerjs_server.url}", f"env.peerjs_key={KEY}",
        "agent=ppo", "agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=64",
        "total_steps=256", "eval.episodes=1", "eval.every_steps=0", "tracking=none",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 256" in r.output


def test_a_peerjs_server_that_is_not_there_or_takes_another_key_refuses_the_run_before_it_starts(
    peerjs_server: PeerJSServer,
) -> None:
    """Said as a ConfigError of the setting to change (one line, no run), not a traceback after
    the run started."""
    from framework.errors import ConfigError
    from framework_plugins.fighter.config import FighterConfig
    from framework_plugins.fighter.plugin import Fighter

    def plugin(url: str, key: str) -> Fighter:
        cfg = FighterConfig(transport="python", signaling="peerjs", peerjs_url=url, peerjs_key=key)
        return Fighter(cfg)

    nowhere = f"http://127.0.0.1:{free_port()}/"
    with pytest.raises(ConfigError) as refused:
        plugin(nowhere, KEY)
    assert str(refused.value).startswith(f"env.peerjs_url={nowhere}: Cannot register at the PeerJS server")
    assert f"`npx peer --port {nowhere.split(':')[2].rstrip('/')} --key {KEY}`" in str(refused.value)
    with pytest.raises(ConfigError, match=r"^env.peerjs_key='wrong' is not the key of the PeerJS server at "):
        plugin(peerjs_server.url, "wrong")
    assert plugin(peerjs_server.url, KEY).peerjs == peerjs_server
