"""n arenas over one connection behave exactly like n single envs with the same seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from framework_plugins.fighter import python_peer
from framework_plugins.fighter.env import OBSERVATION_FIELDS, FightingEnv
from framework_plugins.fighter.transports import InProcessTransport, WebRTCTransport
from framework_plugins.fighter.vector import FighterVectorEnv
from tests.conftest import require_tool, run_cli

N, STEPS, SEED = 4, 500, 10
OBS_SELF_HP = OBSERVATION_FIELDS.index("self_hp")
ACTIONS = np.random.default_rng(0).integers(0, 9, (STEPS, N))


def single(i: int) -> tuple[list[np.ndarray], list[float]]:
    env = FightingEnv(opponent="aggressive")
    obs, _ = env.reset(seed=SEED + i)
    seen, rewards = [obs], []
    for t in range(STEPS):
        obs, reward, terminated, _, _ = env.step(int(ACTIONS[t, i]))
        rewards.append(reward)
        if terminated:
            seen.append(obs)  # the round's last observation
            obs, _ = env.reset()
        seen.append(obs)
    return seen, rewards


def vector(transport: object) -> tuple[list[list[np.ndarray]], list[list[float]]]:
    env = FighterVectorEnv(N, transport=transport, opponent="aggressive")  # type: ignore[arg-type]
    obs, _ = env.reset(seed=SEED)
    seen: list[list[np.ndarray]] = [[obs[i]] for i in range(N)]
    rewards: list[list[float]] = [[] for _ in range(N)]
    for t in range(STEPS):
        obs, reward, terminated, truncated, infos = env.step(ACTIONS[t])
        assert not truncated.any()
        for i in range(N):
            rewards[i].append(float(reward[i]))
            if terminated[i]:
                seen[i].append(infos["final_obs"][i])
            seen[i].append(obs[i])
    env.close()
    return seen, rewards


def assert_same_as_single_envs(transport: object) -> None:
    seen, rewards = vector(transport)
    episodes = 0
    for i in range(N):
        expected_seen, expected_rewards = single(i)
        assert rewards[i] == expected_rewards, f"arena {i}"
        assert len(seen[i]) == len(expected_seen) and all(
            np.array_equal(a, b) for a, b in zip(seen[i], expected_seen, strict=True)
        ), f"arena {i}"
        episodes += len(expected_seen) - STEPS - 1
    assert episodes >= N, "every arena must finish a round, so restarts are compared too"


def test_in_process_arenas_match_single_envs() -> None:
    assert_same_as_single_envs(InProcessTransport())


@pytest.mark.slow
def test_four_arenas_over_one_webrtc_connection_match_four_single_envs() -> None:
    assert_same_as_single_envs(WebRTCTransport("python", connect_timeout_s=30))


@pytest.mark.slow
def test_four_arenas_on_one_browser_page_match_four_single_envs() -> None:
    require_tool("chromium")
    assert_same_as_single_envs(WebRTCTransport("browser", connect_timeout_s=60))


@pytest.mark.slow
def test_ppo_trains_on_arenas_sharing_one_connection(tmp_path: Path) -> None:
    r = run_cli(
        "env=fighter", "env.transport=python", "env.n_envs=4", "agent=ppo", "agent.hyperparams.n_steps=64",
        "agent.hyperparams.batch_size=64", "total_steps=512", "eval.episodes=1", "eval.every_steps=0",
        "tracking=none",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 512" in r.output
    # Only the run's own log lines: aiortc's and aioice's INFO chatter stays out.
    (log,) = tmp_path.glob("outputs/*/*/framework.log")  # the log file names each line's logger
    info = [line for line in log.read_text().splitlines() if "][INFO] - " in line]
    assert info and all(line.split("][")[1].startswith("framework") for line in info), info
    shown = [line.split("] ", 1)[1] for line in r.output.splitlines() if "][INFO] " in line]
    assert shown and set(shown) <= {line.split(" - ", 1)[1] for line in info}, shown
    assert "aioice" not in r.output and "Warning" not in r.output, r.output[-3000:]


@pytest.mark.slow
def test_a_reconnecting_client_truncates_every_arena_and_play_goes_on() -> None:
    import time

    transport = WebRTCTransport("python", connect_timeout_s=30)
    env = FighterVectorEnv(N, transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    env.step(np.zeros(N, dtype=int))
    assert transport.process is not None
    transport.process.kill()  # the page goes away; the heartbeat notices; a new page connects
    transport.process.wait()
    time.sleep(2.5)
    transport.process = python_peer.spawn(transport.connection.client_args, transport.connection.token)
    obs, rewards, terminated, truncated, infos = env.step(np.zeros(N, dtype=int))
    assert truncated.all() and not terminated.any() and (rewards == 0).all()
    assert infos["final_obs"][0].shape == obs[0].shape
    assert (obs[:, OBS_SELF_HP] == 1.0).all()  # every arena restarted
    _, _, _, truncated, _ = env.step(np.zeros(N, dtype=int))
    assert not truncated.any()
    env.close()


def test_sb3_sees_each_ended_rounds_stats_and_not_gymnasiums_masks() -> None:
    from framework_plugins.sb3.gymnasium_vec_env import GymnasiumVecEnv

    venv = GymnasiumVecEnv(FighterVectorEnv(N, transport=InProcessTransport(), opponent="aggressive"))
    venv.seed(SEED)
    venv.reset()
    ended: list[dict[str, float]] = []
    for t in range(STEPS):
        *_, infos = venv.step(ACTIONS[t])
        ended += [info["episode_stats"] for info in infos if "episode_stats" in info]
    assert ended and all(
        set(stats) == {"damage_dealt", "damage_taken", "round_length", "win_rate"} for stats in ended
    )
    assert {stats["win_rate"] for stats in ended} <= {0.0, 1.0} and len(
        {s["round_length"] for s in ended}
    ) > 1


def test_our_dqn_logs_the_rounds_stats_and_not_gymnasiums_masks() -> None:
    from framework_plugins.dqn.rollout import EnvRunner
    from framework_plugins.fighter.config import FighterConfig
    from framework_plugins.fighter.plugin import Fighter

    runner = EnvRunner(Fighter(FighterConfig(transport="inprocess")), N, seed=SEED)
    runner.reset()
    for t in range(STEPS):
        runner.step(ACTIONS[t])
    assert set(runner.metrics()) == {
        "rollout/ep_rew_mean", "rollout/ep_len_mean", "rollout/damage_dealt", "rollout/damage_taken",
        "rollout/round_length", "rollout/win_rate",
    }  # fmt: skip
