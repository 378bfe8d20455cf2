"""Opening the game page: the address said once to the user (its token never logged), a browser
opened only when asked and possible."""

from __future__ import annotations

import pytest

from framework_plugins.fighter import browser

URL, PUBLIC = "http://127.0.0.1:8765/?token=secret-token", "http://127.0.0.1:8765/"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: calls.append(url) or True)
    return calls


def test_without_a_display_no_browser_is_tried_and_the_address_is_said(
    monkeypatch: pytest.MonkeyPatch, opened: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    browser.open_in_users_browser(URL, PUBLIC)
    out = capsys.readouterr().out
    assert not opened
    assert f"open it in a browser on this machine): {URL}" in out
    assert "no browser could be opened here" in out


def test_with_a_display_the_page_opens(
    monkeypatch: pytest.MonkeyPatch, opened: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    browser.open_in_users_browser(URL, PUBLIC)
    assert opened == [URL]
    assert "opened in your browser" in capsys.readouterr().out


def test_open_browser_false_only_says_the_address(
    monkeypatch: pytest.MonkeyPatch, opened: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    browser.open_in_users_browser(URL, PUBLIC, open_browser=False)
    out = capsys.readouterr().out
    assert not opened and URL in out and "no browser could be opened" not in out
