"""The browser transport: the JavaScript game page in a real headless Chromium, over WebRTC."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from framework_plugins.fighter.browser import HeadlessChromium
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.transports import WebRTCTransport
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


def test_browser_transport_passes_the_env_checkers(transport: WebRTCTransport) -> None:
    assert transport.connection.client_kind == "browser"
    assert_passes_env_checkers(transport)


def test_the_page_plays_exactly_like_the_python_twin(transport: WebRTCTransport) -> None:
    actions = np.random.default_rng(1).integers(0, 9, 300)
    assert_plays_like_the_twin(transport, opponent="aggressive", seed=9, actions=actions)


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
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 384" in r.output
