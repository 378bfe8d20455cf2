"""The browser transport: the JavaScript game page in a real headless Chromium, over WebRTC."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from framework_plugins.fighter.browser import HeadlessChromium
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.transports import WebRTCTransport
from framework_plugins.fighter.vector import FighterVectorEnv
from tests.conftest import require_tool, run_cli
from tests.fighter.transport_checks import assert_passes_env_checkers, assert_plays_like_the_twin

pytestmark = pytest.mark.slow


def test_a_missing_system_tool_fails_with_the_command_that_installs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(
        pytest.fail.Exception, match=r"`chromium` is not installed.*apt-get install -y chromium"
    ):
        require_tool("chromium")


@pytest.fixture
def transport():
    require_tool("chromium")
    t = WebRTCTransport("browser", connect_timeout_s=60, step_timeout_s=10)
    yield t
    t.close()


def test_a_reloaded_page_reconnects_and_play_goes_on(transport: WebRTCTransport) -> None:
    env = FightingEnv(transport=transport, reconnect_timeout_s=60)
    env.reset(seed=0)
    env.step(2)
    assert transport.browser is not None
    transport.browser.close()  # the page goes away; a new one loads the same URL
    transport.browser = HeadlessChromium(transport.url)
    truncated = False
    for _ in range(100):
        _, _, terminated, truncated, info = env.step(0)
        if truncated:
            break
        if terminated:
            env.reset()
    assert truncated and info.get("reconnected")
    env.reset(seed=1)
    assert not env.step(0)[3]


def test_ppo_trains_over_the_browser_page_through_the_cli(tmp_path: Path) -> None:
    require_tool("chromium")
    r = run_cli(
        "env=fighter", "env.transport=browser", "env.headless=true", "env.n_envs=1", "agent=ppo",
        "agent.hyperparams.n_steps=128", "agent.hyperparams.batch_size=64", "total_steps=384",
        "eval.episodes=1", "eval.every_steps=0", "tracking=none",
        # Evaluations play on the in-process twin, not over the page: one opponent, not three (of
        # the run's ~30 s, its two evaluations took ~15).
        "env.eval_opponents=[aggressive]",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 384" in r.output


# -- the page as a person sees it, looked into through Chromium's DevTools ---------------------


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch):
    """env.headless=false with the user's page played by an inspectable headless Chromium:
    (transport, pages opened, a function opening one more page at the same address)."""
    from tests.fighter.cdp import InspectedPage

    require_tool("chromium")
    pages: list[InspectedPage] = []
    address: list[str] = []

    def open_page(url: str, public_url: str, *, open_browser: bool = True) -> None:
        address.append(url)
        pages.append(InspectedPage(url))

    monkeypatch.setattr("framework_plugins.fighter.transports.open_in_users_browser", open_page)
    t = WebRTCTransport("browser", headless=False, connect_timeout_s=60, step_timeout_s=10)
    yield t, pages, lambda: pages.append(InspectedPage(address[0])) or pages[-1]
    t.close()
    for page in pages:
        page.close()


def text(page, element: str) -> str:
    return str(page.evaluate(f"document.getElementById({element!r}).textContent"))


def test_the_page_shows_the_trainers_figures_and_phases_without_answering_them(
    watched, tmp_path: Path
) -> None:
    transport, pages, _ = watched
    page = pages[0]
    env = FighterVectorEnv(8, transport=transport, opponent="aggressive")
    env.reset(seed=0)
    for _ in range(120):
        env.step(np.random.default_rng(0).integers(0, 9, 8))
    # Status messages went out all along (phase changes and once a second), none was answered
    # (an answer would have been owed nothing: the flood check, or an error, would have said so).
    assert page.wait_for("fighterState.status && fighterState.status.steps === 960", 10)
    # ...and is shown by the next frame the page draws.
    assert page.wait_for("document.getElementById('steps').textContent === '960'", 5)
    assert text(page, "arena-count") == "8"
    # The rate is the trainer's over its last whole second of stepping: shown within a second.
    assert page.wait_for("+document.getElementById('rate').textContent.replace(/,/g, '') > 0", 5)
    won, lost, drawn = transport.connection.status["rounds"]
    assert page.evaluate("[...document.querySelectorAll('#rounds i')].map(e => +e.textContent)") == [
        won,
        lost,
        drawn,
    ]
    assert page.evaluate("document.querySelectorAll('#arenas canvas.arena').length") == 8
    # The arenas fill the window: together they cover most of the area below the header.
    covered = page.evaluate(
        "(() => { const a = document.getElementById('arenas').getBoundingClientRect();"
        " const s = [...document.querySelectorAll('#arenas canvas')].reduce((t, c) => {"
        " const r = c.getBoundingClientRect(); return t + r.width * r.height; }, 0);"
        " return s / (a.width * a.height); })()"
    )
    assert covered > 0.5
    assert "opponent (aggressive)" in text(page, "opponent-name")
    # Idle (an update): the page says so, and why the game stands still.
    assert page.wait_for("document.getElementById('phase').textContent === 'updating the policy'", 5)
    assert "updating its policy" in text(page, "banner-text")
    transport.set_phase("evaluating")
    assert page.wait_for("document.getElementById('phase').textContent === 'evaluating'", 5)
    env.step(np.zeros(8, dtype=int))
    assert page.wait_for("document.getElementById('phase').textContent === 'training'", 5)
    page.screenshot(tmp_path / "page.png")
    assert (tmp_path / "page.png").stat().st_size > 10_000


#: Draws the agent against each wall in every state (knocked out, lying either way) on a 400x200
#: canvas, and lists where the agent's blue (its figure, its label) touches the canvas's edge.
AGENT_AT_THE_EDGES = """(() => {
  const C = %s, R = window.FighterRules, D = window.FighterDraw, touching = [];
  const walls = [[C.fighter_width / 2, 1], [C.stage_width - C.fighter_width / 2, -1]];
  for (const [x, facing] of walls) for (let state = 0; state < 10; state++) {
    for (const faces of state === 9 ? [facing, -facing] : [facing]) {
      const g = R.newGame(C, 0, "idle");
      Object.assign(g.fighters[0], { x: x, facing: faces, state: state, elapsed: 3, timer: 10 });
      const c = document.createElement("canvas");
      c.width = 400; c.height = 200;
      const ctx = c.getContext("2d");
      D.drawArena(ctx, 400, 200, C, g, { flash: [0, 0], sparks: [], frame: -1 }, ["agent", "idle"]);
      for (const col of [0, 399]) {
        const d = ctx.getImageData(col, 0, 1, 200).data;
        for (let i = 0; i < d.length; i += 4) {
          if (d[i] < 140 && d[i + 1] > 130 && d[i + 2] > 200) { touching.push([x, state, faces]); break; }
        }
      }
    }
  }
  return touching;
})()"""


def test_before_its_first_step_the_page_says_starting_and_draws_a_fighter_at_a_wall_whole(watched) -> None:
    from framework_plugins.fighter import rules

    transport, pages, _ = watched
    page = pages[0]
    assert page.wait_for(
        "window.fighterState && document.getElementById('phase').textContent === 'starting'", 30
    )
    assert page.wait_for("fighterState.connection === 'connected'", 30)
    # The agent against each wall, in each state, is drawn whole with its label (on canvases apart).
    assert page.evaluate(AGENT_AT_THE_EDGES % json.dumps(rules.load_constants())) == []
    # Connected, no step asked for (the agent being built, say) for well past IDLE_S: "starting".
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        assert page.evaluate("[fighterState.connection, document.getElementById('phase').textContent]") == [
            "connected",
            "starting",
        ]
        time.sleep(0.1)
    env = FightingEnv(transport=transport)
    env.reset(seed=0)
    env.step(0)
    assert page.wait_for("document.getElementById('phase').textContent === 'updating the policy'", 5)


def test_a_page_whose_run_ended_says_how_and_does_not_reconnect(watched, tmp_path: Path) -> None:
    transport, pages, _ = watched
    page = pages[0]
    env = FighterVectorEnv(4, transport=transport, opponent="aggressive")
    env.reset(seed=0)
    for _ in range(30):
        env.step(np.zeros(4, dtype=int))
    transport.stop_flag = threading.Event()  # the run's, never set: its training ran to the end
    env.close()
    assert page.wait_for("fighterState.connection === 'ended'", 10)
    assert page.wait_for("document.getElementById('phase').textContent === 'run finished'", 5)
    assert text(page, "banner-text").startswith("The run has ended: training finished.")
    assert text(page, "status") == "disconnected: the run has ended"
    assert text(page, "steps") == "120"
    assert page.evaluate("document.getElementById('take-over').hidden") is True
    # It stays so: a page that tried again would say 'reconnecting' within its first back-off (0.5 s).
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert page.evaluate("[fighterState.connection, fighterState.attempts]") == ["ended", 0]
        time.sleep(0.2)
    page.screenshot(tmp_path / "ended.png")
    assert (tmp_path / "ended.png").stat().st_size > 10_000


def test_the_page_reconnects_by_itself_when_its_connection_drops(watched) -> None:
    transport, pages, _ = watched
    env = FightingEnv(transport=transport, reconnect_timeout_s=60)
    env.reset(seed=0)
    env.step(2)
    transport.connection.drop("dropped by the test")
    assert pages[0].wait_for("fighterState.connection === 'reconnecting'", 5)
    _, _, _, truncated, info = env.step(0)  # waits for the page, which comes back by itself
    assert truncated and info["reconnected"]
    assert pages[0].evaluate("fighterState.connection") == "connected"
    env.reset(seed=1)
    assert not env.step(0)[3]


def test_a_second_tab_takes_over_and_the_first_says_so_and_stays_away(watched) -> None:
    transport, pages, open_another = watched
    env = FightingEnv(transport=transport, reconnect_timeout_s=60)
    env.reset(seed=0)
    second = open_another()
    first = pages[0]
    assert first.wait_for("fighterState.connection === 'replaced'", 30)
    # ...and says so from the next frame it draws.
    assert first.wait_for(
        "document.getElementById('banner-text').textContent.includes('another page took over')", 5
    )
    assert first.evaluate("document.getElementById('take-over').hidden") is False
    assert first.wait_for(
        "document.getElementById('phase').textContent === 'inactive: another page trains'", 5
    )
    assert env.step(0)[3]  # truncated: the round moved to the other page
    env.reset(seed=1)
    for _ in range(5):
        assert not env.step(0)[3]
    time.sleep(3)  # the first page does not come back by itself
    assert first.evaluate("fighterState.connection") == "replaced" and transport.connection.takeovers == 1
    assert second.evaluate("fighterState.connection") == "connected"
    first.evaluate("document.getElementById('take-over').click()")  # ... until asked to
    assert second.wait_for("fighterState.connection === 'replaced'", 30)
    assert env.step(0)[3]
    env.reset(seed=2)
    assert not env.step(0)[3] and transport.connection.takeovers == 2
    transport.close()  # the run ends: the replaced page learns the trainer is gone, and offers nothing
    assert second.wait_for(
        "document.getElementById('banner-text').textContent.includes('The trainer no longer answers')", 20
    )
    assert second.evaluate("document.getElementById('take-over').hidden") is True
    assert text(second, "phase") == "the trainer is gone"


# -- one headless page's transport, shared (a Chromium's start and end took seconds each) -------


@pytest.fixture(scope="module")
def shared_transport():
    """A headless page's transport for the tests that only play over it, made once: the module's
    last tests, so that its Chromium is gone with them."""
    require_tool("chromium")
    t = WebRTCTransport("browser", connect_timeout_s=60, step_timeout_s=10)
    yield t
    t.close()


def test_browser_transport_passes_the_env_checkers(shared_transport: WebRTCTransport) -> None:
    assert shared_transport.connection.client_kind == "browser"
    assert_passes_env_checkers(shared_transport)


def test_the_page_plays_exactly_like_the_python_twin(shared_transport: WebRTCTransport) -> None:
    actions = np.random.default_rng(1).integers(0, 9, 300)
    assert_plays_like_the_twin(shared_transport, opponent="aggressive", seed=9, actions=actions)


def _cpus_of_group(group: int) -> dict[int, set[int]]:
    """The CPUs each process of process group `group` may run on."""
    found: dict[int, set[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) == group:
                found[int(entry)] = os.sched_getaffinity(int(entry))
        except OSError:  # ended meanwhile
            continue
    return found


def _distinct(cpus: dict[int, set[int]]) -> set[frozenset[int]]:
    return {frozenset(c) for c in cpus.values()}


def _cpus_of_browser(browser: HeadlessChromium) -> set[frozenset[int]]:
    """The distinct CPU sets of a headless Chromium's processes and its guard's."""
    deadline = time.monotonic() + 30
    while browser.pid is None or len(_cpus_of_group(browser.pid)) < 2:  # started, and started its own
        assert time.monotonic() < deadline, "Chromium did not start"
        time.sleep(0.1)
    return _distinct(_cpus_of_group(browser.pid) | _cpus_of_group(browser.guard.pid))


def test_headless_chromium_runs_on_one_cpu_of_its_own_and_the_trainer_keeps_them_all(
    shared_transport: WebRTCTransport,
) -> None:
    transport = shared_transport
    allowed = os.sched_getaffinity(0)
    assert transport.browser is not None
    assert transport.browser.pid is not None
    first = _cpus_of_group(transport.browser.pid) | _cpus_of_group(transport.browser.guard.pid)
    assert len(first) >= 3  # the browser, its zygote, network service, renderer...
    if len(allowed) < 2:  # nothing to keep apart
        assert transport.browser.cpu is None
        assert _distinct(first) == {frozenset(allowed)}
        return
    assert transport.browser.cpu == max(allowed)
    assert _distinct(first) == {frozenset({max(allowed)})}, first
    assert os.sched_getaffinity(0) == allowed  # the thread that started it was let go again
    # A second Chromium of the same trainer takes the next CPU down; unpinned, one takes them all.
    second = HeadlessChromium("about:blank")
    unpinned = HeadlessChromium("about:blank", pin=False)
    try:
        assert second.cpu == sorted(allowed)[-2]
        assert _cpus_of_browser(second) == {frozenset({second.cpu})}
        assert unpinned.cpu is None
        assert _cpus_of_browser(unpinned) == {frozenset(allowed)}
    finally:
        second.close()
        unpinned.close()
    assert transport.browser.cpu == max(allowed)
    # Two steps still go through: the pinned page answers.
    transport.reset([0], "idle")
    assert transport.step([0]).shape == (1, 30)


def test_a_killed_headless_chromium_is_started_anew_and_training_goes_on(
    shared_transport: WebRTCTransport, caplog: pytest.LogCaptureFixture
) -> None:
    """The module's last: its transport goes on with the new Chromium, and it ends with the module."""
    t = shared_transport
    caplog.set_level(logging.WARNING)
    env = FightingEnv(transport=t, reconnect_timeout_s=60)
    env.reset(seed=0)
    env.step(0)
    assert t.browser is not None
    first = t.browser.pid
    assert first is not None
    assert t.restarts == 0 and not t.lost_reasons  # the tests before it lost nothing
    os.killpg(first, signal.SIGKILL)  # Chromium's processes: its guard is left to notice
    t0, wall0 = time.monotonic(), time.time()
    _, _, _, truncated, info = env.step(0)
    assert truncated and info["reconnected"] and time.monotonic() - t0 < 30
    said = [r for r in caplog.records if "lost the headless Chromium page" in r.getMessage()]
    assert said and "exited with code -9" in said[0].getMessage(), [r.getMessage() for r in said]
    assert said[0].created - wall0 < 5  # said at once, before the new one starts
    assert t.restarts == 1 and t.browser.pid != first
    assert "the headless Chromium exited" in t.lost_reasons[0]
    env.reset(seed=1)
    for _ in range(10):
        assert not env.step(0)[3]
