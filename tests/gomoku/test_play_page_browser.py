"""The play page in a real headless Chromium: a person's clicks reach the server, the agent answers,
and the page draws what the server says."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp

from framework_plugins.gomoku.page import PlayServer
from framework_plugins.gomoku.rules import Gomoku
from tests.conftest import chromium_env, require_tool
from tests.gomoku.test_play_page import SIMULATIONS, SearchOnlyPlayer, interruptible_player, state_of

# --- the page in a real browser -----------------------------------------------------------


class DevTools:
    """A page of a headless Chromium driven over the Chrome DevTools Protocol."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket, self.last_id = socket, 0

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.last_id += 1
        await self.socket.send_json({"id": self.last_id, "method": method, "params": params})
        while True:  # events (none enabled) and answers to nothing else
            message = await self.socket.receive_json(timeout=30)
            if message.get("id") == self.last_id:
                assert "error" not in message, message
                return message["result"]

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 15) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"the page never showed {expression}")

    async def click(self, selector: str) -> None:
        """A real mouse click (move, press, release) at the middle of the element."""
        box = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1
            )


def start_chromium(url: str, profile: Path) -> subprocess.Popen[bytes]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
    ]
    return subprocess.Popen(
        [
            require_tool("chromium"),
            *flags,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--window-size=1280,860",
            url,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=chromium_env(),
    )


async def open_devtools(session: aiohttp.ClientSession, profile: Path) -> DevTools:
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        assert time.monotonic() < deadline, "Chromium never opened its DevTools port"
        await asyncio.sleep(0.1)
    port = port_file.read_text().split()[0]
    async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
        targets = await response.json()
    page = next(t for t in targets if t["type"] == "page")
    return DevTools(await session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0))


#: The page's board as the server's flat list: 1 black, -1 white, 0 empty.
PAGE_BOARD = """[...document.querySelectorAll('#board .cell')].map(c => {
  const s = c.querySelector('.stone');
  return s.classList.contains('black') ? 1 : s.classList.contains('white') ? -1 : 0;
})"""
PAGE_VISITS = "[...document.querySelectorAll('#board .cell')].map(c => Number(c.dataset.visits))"
PAGE_SHARES = "[...document.querySelectorAll('#board .cell .pct')].map(p => p.textContent)"
#: Requests the page made for the state: none, as the server pushes it.
STATE_REQUESTS = "performance.getEntriesByType('resource').filter(e => e.name.includes('/api/state')).length"
STATUS = "document.getElementById('status').textContent"


async def play_in_the_browser(server: PlayServer, go: threading.Event, profile: Path) -> None:
    size = server.game.board_size
    browser = start_chromium(server.url, profile)
    try:
        async with aiohttp.ClientSession() as session:
            page = await open_devtools(session, profile)
            await page.wait_for(f"document.querySelectorAll('#board .cell').length === {size * size}")
            assert await page.evaluate("document.querySelectorAll('#board .label').length") == 4 * (size + 1)
            assert "Your turn: you play Black" in await page.evaluate(
                "document.getElementById('status').textContent"
            )

            # The first move: the agent is held, so the page must show it thinking; its move is pushed
            # to the page (no request asks the state again and again meanwhile).
            await page.click('.cell[data-x="4"][data-y="4"]')
            await page.wait_for("document.getElementById('status').classList.contains('thinking')")
            assert "is thinking" in await page.evaluate("document.getElementById('status').textContent")
            assert (await page.evaluate(PAGE_BOARD))[4 * size + 4] == 1
            await asyncio.sleep(1.5)
            go.set()
            await page.wait_for("document.querySelectorAll('#move-list li').length === 2")
            assert await page.evaluate(STATE_REQUESTS) == 0

            for x, y in [(None, None), (2, 6), (6, 1), (1, 1)]:
                if x is not None:
                    before = state_of(server)
                    if before["result"] is not None or before["board"][y * size + x] != 0:
                        break
                    await page.click(f'.cell[data-x="{x}"][data-y="{y}"]')
                    await page.wait_for(
                        f"document.querySelectorAll('#move-list li').length === {len(before['moves']) + 2}"
                    )
                else:
                    before = {
                        "board": [int(i == 4 * size + 4) for i in range(size * size)],
                        "moves": [[4, 4]],
                    }
                    await page.wait_for("document.querySelectorAll('#move-list li').length === 2")
                await page.wait_for("document.body.dataset.busy === '0'")
                state = state_of(server)
                agent_x, agent_y = state["moves"][-1]
                assert before["board"][agent_y * size + agent_x] == 0, "the agent played on a taken cell"
                assert await page.evaluate(PAGE_BOARD) == state["board"]
                assert await page.evaluate(PAGE_VISITS) == state["analysis"]["visits"]
                assert sum(state["analysis"]["visits"]) == SIMULATIONS
                assert await page.evaluate("document.querySelectorAll('#board .cell.heated').length") > 0
                # Shares written out only where they stand out: the top moves, in %.
                written = [t for t in await page.evaluate(PAGE_SHARES) if t]
                assert 1 <= len(written) <= 5 and all(t.endswith("%") for t in written), written
                value = state["analysis"]["value"]
                shown = await page.evaluate("document.getElementById('value').textContent")
                assert shown.startswith(f"Agent's estimate: {'+' if value >= 0 else '−'}{abs(value):.2f}")
                assert await page.evaluate("document.querySelectorAll('#top-moves li').length") >= 2
            shot = await page.send("Page.captureScreenshot", format="png")
            (profile.parent / "play_page.png").write_bytes(base64.b64decode(shot["data"]))

            # A refused click: a taken cell says so, and nothing changes.
            moves = len(state_of(server)["moves"])
            await page.click('.cell[data-x="4"][data-y="4"]')
            assert "is taken" in await page.wait_for("document.getElementById('error').textContent")
            assert len(state_of(server)["moves"]) == moves

            # Undo, then a new game as White: the agent opens.
            await page.click("#undo")
            await page.wait_for(f"document.querySelectorAll('#move-list li').length === {moves - 2}")
            assert len(state_of(server)["moves"]) == moves - 2
            # The pushed state can come before the undo's own answer: the buttons stay disabled until then.
            await page.wait_for("document.body.dataset.busy === '0'")
            await page.click("#new-white")
            await page.wait_for("document.querySelectorAll('#move-list li').length === 1")
            await page.wait_for("document.body.dataset.busy === '0'")
            state = state_of(server)
            assert state["human"] == -1 and await page.evaluate(PAGE_BOARD) == state["board"]
            assert "Your turn: you play White" in await page.evaluate(
                "document.getElementById('status').textContent"
            )
            await page.socket.close()
    finally:
        browser.terminate()
        browser.wait(10)


def test_a_person_plays_the_agent_in_a_real_browser(tmp_path: Path) -> None:
    go = threading.Event()
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=9, n_in_row=5), go))
    server.start()
    try:
        asyncio.run(play_in_the_browser(server, go, tmp_path / "profile"))
    finally:
        go.set()
        server.close()


def board_after(moves: list[list[int]], size: int) -> list[int]:
    """The flat board after `moves` ([x, y], black first)."""
    board = [0] * (size * size)
    for i, (x, y) in enumerate(moves):
        board[y * size + x] = 1 if i % 2 == 0 else -1
    return board


async def play_to_the_end_and_step_back(server: PlayServer, profile: Path) -> None:
    size = server.game.board_size
    browser = start_chromium(server.url, profile)
    try:
        async with aiohttp.ClientSession() as session:
            page = await open_devtools(session, profile)
            await page.wait_for(f"document.querySelectorAll('#board .cell').length === {size * size}")
            assert await page.evaluate("document.getElementById('banner').hidden")
            top = "document.getElementById('board').getBoundingClientRect().top"
            board_top = await page.evaluate(top)
            while state_of(server)["result"] is None:  # the first empty cell, each turn
                state = state_of(server)
                cell = state["board"].index(0)
                await page.click(f'.cell[data-x="{cell % size}"][data-y="{cell // size}"]')
                await page.wait_for(
                    f"document.querySelectorAll('#move-list li').length > {len(state['moves'])}"
                )
                await page.wait_for("document.body.dataset.busy === '0'")
            final = state_of(server)
            moves = len(final["moves"])
            await page.wait_for("!document.getElementById('banner').hidden")
            said = {"human": "You win!", "agent": "The agent wins", "draw": "A draw"}[
                final["result"]["winner"]
            ]
            assert said in await page.evaluate("document.getElementById('banner-text').textContent")
            assert await page.evaluate(top) == board_top  # the banner did not push the board down

            # Stepping back: the board of an earlier move (with the agent's search before it), then on.
            await page.click("#move-list li:nth-child(2)")  # after the agent's first move
            assert await page.evaluate(PAGE_BOARD) == board_after(final["moves"][:2], size)
            assert "Reviewing: the board after move 2 of" in await page.evaluate(STATUS)
            assert await page.evaluate("document.getElementById('banner').hidden")
            note = await page.evaluate("document.getElementById('review-note').textContent")
            assert note.startswith("The game is over: “Back to the game” shows how it ended"), note
            assert await page.evaluate(PAGE_VISITS) == final["analyses"][0]["visits"]
            await page.send("Input.dispatchKeyEvent", type="keyDown", key="ArrowLeft", code="ArrowLeft")
            assert await page.evaluate(PAGE_BOARD) == board_after(final["moves"][:1], size)
            moves_before = len(state_of(server)["moves"])
            await page.click('.cell[data-x="0"][data-y="0"]')  # a click on the board while reviewing
            assert "Back to the game" in await page.wait_for("document.getElementById('error').textContent")
            assert len(state_of(server)["moves"]) == moves_before
            await page.click("#live")
            assert await page.evaluate(PAGE_BOARD) == final["board"]
            assert not await page.evaluate("document.getElementById('banner').hidden")
            assert await page.evaluate(STATE_REQUESTS) == 0
            assert moves == len(state_of(server)["moves"])
            shot = await page.send("Page.captureScreenshot", format="png")
            (profile.parent / "play_page_result.png").write_bytes(base64.b64decode(shot["data"]))
            await page.socket.close()
    finally:
        browser.terminate()
        browser.wait(10)


def test_the_page_says_the_result_in_a_banner_and_steps_back_through_the_game(tmp_path: Path) -> None:
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=3, n_in_row=3)))
    server.start()
    try:
        asyncio.run(play_to_the_end_and_step_back(server, tmp_path / "profile"))
    finally:
        server.close()


async def undo_while_the_agent_thinks(server: PlayServer, profile: Path) -> None:
    browser = start_chromium(server.url, profile)
    try:
        async with aiohttp.ClientSession() as session:
            page = await open_devtools(session, profile)
            await page.wait_for("document.querySelectorAll('#board .cell').length === 49")
            await page.click('.cell[data-x="3"][data-y="3"]')
            await page.wait_for("document.getElementById('status').classList.contains('thinking')")
            # Once the server says the agent thinks, the buttons that stop its search are there to press.
            await page.wait_for("!document.getElementById('undo').disabled")
            assert not await page.evaluate("document.getElementById('new-white').disabled")
            assert server.thinking
            await page.click('.cell[data-x="5"][data-y="5"]')  # a click while it thinks is answered
            said = await page.wait_for("document.getElementById('error').textContent")
            assert said == "Wait: it is the agent's turn.", said
            shot = await page.send("Page.captureScreenshot", format="png")
            (profile.parent / "play_page_thinking.png").write_bytes(base64.b64decode(shot["data"]))
            await page.click("#undo")
            await page.wait_for("document.body.dataset.busy === '0'")
            await page.wait_for("document.querySelectorAll('#move-list li').length === 0")
            assert state_of(server)["moves"] == [] and server._engine.interrupted >= 1
            assert await page.evaluate(PAGE_BOARD) == [0] * 49
            assert await page.evaluate("document.getElementById('error').hidden"), await page.evaluate(
                "document.getElementById('error').textContent"
            )  # the stopped move's answer is not said
            assert "Your turn: you play Black" in await page.evaluate(STATUS)
            await page.socket.close()
    finally:
        browser.terminate()
        browser.wait(10)


def test_undo_while_the_agent_thinks_stops_it_and_the_page_shows_the_game_before_the_move(
    tmp_path: Path,
) -> None:
    go = threading.Event()
    server = PlayServer(interruptible_player(Gomoku(board_size=7, n_in_row=4), go))
    server.start()
    try:
        asyncio.run(undo_while_the_agent_thinks(server, tmp_path / "profile"))
    finally:
        go.set()
        server.close()
