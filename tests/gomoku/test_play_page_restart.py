"""The play page, its server stopped and started again (a new token): it says so in one line, rather
than "trying again…" for ever and a 403 said twice as a server that does not answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from framework_plugins.gomoku.page import PlayServer
from framework_plugins.gomoku.rules import Gomoku
from tests.gomoku.test_play_page import SearchOnlyPlayer
from tests.gomoku.test_play_page_browser import open_devtools, start_chromium

ERROR = "document.getElementById('error').textContent"


async def restart_under_the_page(server: PlayServer, profile: Path) -> None:
    browser = start_chromium(server.url, profile)
    port = int(server.url.split(":")[2].split("/")[0])
    again: PlayServer | None = None
    try:
        async with aiohttp.ClientSession() as session:
            page = await open_devtools(session, profile)
            await page.wait_for("document.querySelectorAll('#board .cell').length === 49")
            server.close()
            said = await page.wait_for(ERROR)
            gone = ("Lost the connection to the server: trying again…", "The server is gone: start it again")
            assert said.startswith(gone), said
            again = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=5)), port=port)
            again.start()
            new_token = "The server was started again, with a new token: open the address it printed."
            assert await page.wait_for(f"{ERROR} === {new_token!r} && {ERROR}", timeout=30) == new_token
            await page.click("#new-black")  # a request now: refused once, not as a server that is gone
            said = await page.wait_for(f"{ERROR} !== {new_token!r} && {ERROR}")
            assert said == "wrong or missing token: open the address the server printed", said
            await page.socket.close()
    finally:
        browser.terminate()
        browser.wait(10)
        if again is not None:
            again.close()


def test_the_page_says_its_server_was_started_again(tmp_path: Path) -> None:
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=5)))
    server.start()
    try:
        asyncio.run(restart_under_the_page(server, tmp_path / "profile"))
    finally:
        server.close()
