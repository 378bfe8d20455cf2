"""A trained run shipped and served: `ship RUN DEST` writes an agent package, `gomocup RUN --write-brain`
the program a Gomocup manager runs, `play RUN` its page behind a token until stopped."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.alphazero.brain import MOVE
from tests.conftest import LOADED_S, run_cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_play_serves_the_page_with_a_token_until_stopped(trained: tuple[Path, str], stop: int) -> None:
    """Overrides after the options; the token in no line the server writes, not even about a request
    line too long for aiohttp; stopped in the middle of a long search, it ends within 2 s."""
    cwd, _ = trained
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "framework",
            "play",
            "outputs/run",
            "--no-browser",
            "search.num_simulations=20000",
        ],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/)\?token=(\S+)", line)
        assert found, line + (process.stderr.read() if process.poll() is not None else "")  # type: ignore[union-attr]
        page, port, token = found[1], int(found[2]), found[3]
        with urllib.request.urlopen(f"{page}?token={token}", timeout=30) as response:
            assert response.status == 200 and "<html" in response.read().decode().lower()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(page, timeout=30)
        assert refused.value.code == 403
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:  # over aiohttp's 8190
            raw.sendall(f"GET /api/state?token={token}&pad={'x' * 9000} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert re.match(rb"HTTP/1\.[01] 4\d\d ", raw.recv(100))
        state = json.loads(urllib.request.urlopen(f"{page}api/state?token={token}", timeout=30).read())
        assert state["simulations"] == 20000
        opening = urllib.request.Request(
            f"{page}api/new?token={token}", data=b'{"colour": "white"}', method="POST"
        )
        threading.Thread(target=lambda: _quietly(opening), daemon=True).start()
        deadline = time.monotonic() + 30
        while not json.loads(urllib.request.urlopen(f"{page}api/state?token={token}", timeout=30).read())[
            "thinking"
        ]:
            assert time.monotonic() < deadline, "the agent never started its move"
            time.sleep(0.05)
        time.sleep(0.5)
        stopped = time.monotonic()
        process.send_signal(stop)
        assert process.wait(timeout=30) == 0
        assert time.monotonic() - stopped < 2.0 + LOADED_S
        assert token not in process.stderr.read()  # type: ignore[union-attr]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _quietly(request: urllib.request.Request) -> None:
    """A request whose answer does not matter (the server may stop before it answers)."""
    with contextlib.suppress(OSError):
        urllib.request.urlopen(request, timeout=60).read()


def test_write_brain_writes_the_program_a_gomocup_manager_runs(
    trained: tuple[Path, str], tmp_path: Path
) -> None:
    cwd, _ = trained
    folder = tmp_path / "brains"
    r = run_cli("gomocup", "outputs/run", "--write-brain", str(folder), "search.num_simulations=8", cwd=cwd)
    assert r.returncode == 0, r.stderr
    brain = folder / "pbrain-framework"
    assert os.access(brain, os.X_OK) and str(brain) in r.stdout
    played = subprocess.run(
        [str(brain)], input="START 9\nBEGIN\nEND\n", capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    answers = [line for line in played.stdout.splitlines() if not line.startswith("MESSAGE")]
    assert played.returncode == 0 and answers[0] == "OK" and MOVE.match(answers[1]), (
        played.stdout + played.stderr
    )
    refused = run_cli("gomocup", "no/such/run", "--write-brain", str(tmp_path / "none"), cwd=cwd)
    assert refused.returncode == 1 and not (tmp_path / "none").exists()


def test_ship_writes_only_a_new_empty_or_earlier_shipped_folder_and_only_an_alphazero_run(
    trained: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It removed whatever DEST named (a user's working directory, the run it read from) and wrote a
    package that could not be imported for --about 'say "hi"'; a DQN run was a traceback."""
    import ast

    import yaml

    from framework_plugins.alphazero.ship import main as ship_main

    cwd, _ = trained
    run = cwd / "outputs/run"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("important")
    for dest in (mine, run, run / "checkpoints", cwd):
        assert ship_main([str(run), str(dest)]) == 1
    said = " ".join(capsys.readouterr().err.split())
    assert f"Error: {mine} holds notes.txt: ship writes a new or empty folder" in said, said
    assert f"Error: {run}: DEST would hold or be inside the run it ships" in said, said
    assert (mine / "notes.txt").read_text() == "important" and (run / "checkpoints/latest").is_file()

    shipped = tmp_path / "shipped"
    for _ in range(2):  # the second time over the first's
        assert ship_main([str(run), str(shipped), "--about", 'Says "hi" \\ bye.']) == 0
    ast.parse((shipped / "__init__.py").read_text())
    assert ast.literal_eval((shipped / "__init__.py").read_text().strip()) == 'Says "hi" \\ bye.'

    other = tmp_path / "dqn_run"
    shutil.copytree(shipped, other / "checkpoints" / "step_0000000001")
    (other / "checkpoints" / "latest").write_text("step_0000000001")
    saved = yaml.safe_load((other / "checkpoints/step_0000000001/config.yaml").read_text())
    saved["agent"]["name"] = "dqn"
    (other / "checkpoints/step_0000000001/config.yaml").write_text(yaml.safe_dump(saved))
    assert ship_main([str(other), str(tmp_path / "x")]) == 1
    assert ship_main([str(tmp_path / "nowhere"), str(tmp_path / "x")]) == 1
    assert ship_main([str(run / "checkpoints" / "latest"), str(tmp_path / "x")]) == 1  # a file
    said = " ".join(capsys.readouterr().err.split())
    assert "that run trained agent=dqn on env=gomoku; ship writes an AlphaZero agent" in said, said
    assert "nowhere: no such directory; RUN is a run directory" in said, said
    assert "latest: not a directory; RUN is a run directory" in said, said
    assert not (tmp_path / "x").exists()


def test_play_refuses_a_port_browsers_will_not_load_a_page_from(tmp_path: Path) -> None:
    r = run_cli("play", "gomoku_15x15", "--port", "6000", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--port 6000: browsers refuse to load a page from port 6000" in " ".join(r.stderr.split())
