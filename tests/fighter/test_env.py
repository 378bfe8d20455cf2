"""FightingEnv on the in-process transport: gymnasium/SB3 contracts, rewards, rendering, CLI."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from framework.app import compose
from framework.run import run
from framework_plugins.fighter import drawing
from framework_plugins.fighter.env import OBSERVATION_FIELDS, FightingEnv
from framework_plugins.fighter.rules import A


def test_passes_gymnasium_and_sb3_env_checkers() -> None:
    from gymnasium.utils.env_checker import check_env as gym_check
    from stable_baselines3.common.env_checker import check_env as sb3_check

    gym_check(FightingEnv(render_mode="rgb_array"), skip_render_check=False)
    sb3_check(FightingEnv(), warn=True)


def test_observation_is_documented_field_by_field() -> None:
    env = FightingEnv()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (len(OBSERVATION_FIELDS),) == env.observation_space.shape
    named = dict(zip(OBSERVATION_FIELDS, obs, strict=True))
    assert named["self_hp"] == 1.0 and named["opponent_hp"] == 1.0
    assert named["self_state_idle"] == 1.0 and named["time_left"] == 1.0
    assert named["self_x"] < named["opponent_x"] and named["distance"] > 0


def test_observation_fields_hold_the_named_values() -> None:
    env = FightingEnv(opponent="random")
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(1)
    C = env.C
    for _ in range(120):
        obs, *_, terminated, _, _ = env.step(int(rng.integers(0, 9)))
        named = dict(zip(OBSERVATION_FIELDS, obs.tolist(), strict=True))
        me, foe = env.game["fighters"]
        peak = C["jump_velocity"] ** 2 / (2 * C["gravity"])
        for prefix, f in (("self", me), ("opponent", foe)):
            assert named[f"{prefix}_x"] == np.float32(f["x"] / C["stage_width"])
            assert named[f"{prefix}_y"] == np.float32(f["y"] / peak)
            assert named[f"{prefix}_vx"] == np.float32(f["vx"] / C["walk_speed"])
            assert named[f"{prefix}_vy"] == np.float32(f["vy"] / C["jump_velocity"])
            assert named[f"{prefix}_hp"] == np.float32(f["hp"] / C["max_hp"])
            assert named[f"{prefix}_facing"] == f["facing"]
            assert named[f"{prefix}_state_{C['states'][f['state']]}"] == 1.0
            assert sum(v for k, v in named.items() if k.startswith(f"{prefix}_state_")) == 1.0
            assert named[f"{prefix}_cooldown"] == np.float32(f["cooldown"] / 120)
            assert named[f"{prefix}_timer"] == np.float32(min(4.0, f["timer"] / 30))
        assert named["distance"] == np.float32((foe["x"] - me["x"]) / C["stage_width"])
        assert named["time_left"] == np.float32(1 - env.game["frame"] / C["round_frames"])
        if terminated:
            break


def test_seeded_resets_repeat_trajectories() -> None:
    def trajectory(seed: int) -> list[float]:
        env = FightingEnv(opponent="random")
        env.reset(seed=seed)
        rewards = []
        for t in range(300):
            _, reward, terminated, _, _ = env.step((t * 7) % 9)
            rewards.append(reward)
            if terminated:
                break
        return rewards + [float(x) for x in env.game["fighters"][1].values()]

    assert trajectory(3) == trajectory(3)
    assert trajectory(3) != trajectory(4)


def test_reward_is_damage_difference_plus_win_bonus() -> None:
    env = FightingEnv(opponent="idle", damage_reward=2.0, win_reward=5.0)
    env.reset(seed=0)
    total, info, terminated = 0.0, {}, False
    while not terminated:
        close = env.game["fighters"][1]["x"] - env.game["fighters"][0]["x"] <= 60
        _, reward, terminated, truncated, info = env.step(A.PUNCH if close else A.RIGHT)
        total += reward
        assert not truncated
    assert info["winner"] == 0
    assert total == pytest.approx(2.0 * 1.0 + 5.0)  # one full health bar dealt, none taken, a win
    assert info["episode_stats"]["win_rate"] == 1.0 and info["episode_stats"]["damage_dealt"] == 100.0


def test_bad_actions_and_stepping_after_the_end_are_errors() -> None:
    env = FightingEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action 9 is not in Discrete"):
        env.step(9)
    terminated = False
    while not terminated:  # the aggressive opponent wins against noops
        terminated = env.step(0)[2]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)


def test_render_shows_both_fighters() -> None:
    env = FightingEnv(render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame is not None and frame.shape == (200, 400, 3) and frame.dtype == np.uint8
    colors = {tuple(c) for c in frame.reshape(-1, 3)}
    assert all(c in colors for c in drawing.COLORS)  # the agent's and the opponent's


def test_plugin_rejects_unknown_opponent_and_transport() -> None:
    with pytest.raises(ValueError, match="env.opponent='boss' is not valid; choose one of idle, random"):
        run(compose(["env=fighter", "env.opponent=boss", "tracking=none"]), run_dir=Path("/tmp/unused"))
    with pytest.raises(ValueError, match="env.transport='carrier-pigeon' is not valid"):
        run(
            compose(["env=fighter", "env.transport=carrier-pigeon", "tracking=none"]),
            run_dir=Path("/tmp/unused"),
        )


@pytest.mark.slow
def test_ppo_trains_on_fighter_and_logs_win_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    final = run(
        compose([
            "env=fighter", "env.transport=inprocess", "env.n_envs=2", "agent=ppo",
            "agent.hyperparams.n_steps=128", "total_steps=512", "eval.episodes=2", "eval.every_steps=0",
            "progress=off",
        ]),
        run_dir=tmp_path / "run",
    )  # fmt: skip
    assert {"eval/win_rate", "eval/damage_dealt", "eval/damage_taken", "eval/round_length"} <= set(final)
    assert 0.0 <= final["eval/win_rate"] <= 1.0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (r,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    assert "eval/win_rate" in r.data.metrics and r.data.tags["plugin.env"] == "fighter"
    assert gym.spaces.Discrete(9).n == 9
