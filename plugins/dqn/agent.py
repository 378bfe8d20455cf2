"""Our DQN agent: ε-greedy acting, replay, a target network and the Q-learning update."""

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Optional

import gymnasium as gym
import numpy as np
import torch

from framework.contracts import Buffer, CheckedAgent, EnvPlugin, RunContext, SpacesEnvPlugin
from framework.errors import ConfigError, check_at_least, check_choice
from framework.schedules import Schedule, build_schedule

from .config import DQNConfig
from .learner import LOSSES, QLearner
from .networks import NETWORKS, activation_name, build_q_network
from .replay import Replay, check_buffer, check_frames, make_replay
from .rollout import EnvRunner

log = logging.getLogger("framework")

WEIGHTS_FILE = "dqn.pt"
STATE_FILE = "dqn.json"
BUFFER_FILE = "replay.npz"


class DQNAgent:
    """Our DQN: a Q network (MLP or Nature CNN), target network, double-Q, ε-greedy schedules."""

    Config: ClassVar[type] = DQNConfig

    def __init__(self, cfg: DQNConfig) -> None:
        self.cfg = cfg
        _validate(cfg)
        self.learner: Optional[QLearner] = None
        self.spaces: Dict[str, Any] = {}
        self.rng = np.random.default_rng()
        self.replay: Optional[Replay] = None
        self.epsilon: Schedule = build_schedule(cfg.exploration, name="agent.exploration", total_steps=1)
        self.learning_rate: Schedule = build_schedule(
            cfg.learning_rate, name="agent.learning_rate", total_steps=1
        )
        self.step = 0
        self._restored: Optional[Dict[str, Any]] = None
        self._restored_buffer: Optional[Path] = None
        self._runner: Optional[EnvRunner] = None
        self._restored_window: Dict[str, Any] = {}

    def learn(self, ctx: RunContext) -> None:
        cfg = self.cfg
        runner = self._runner = EnvRunner(ctx.env_plugin, ctx.n_envs, seed=ctx.seed + ctx.start_step)
        runner.restore(self._restored_window)
        flushing = cfg.flush_denormal and torch.set_flush_denormal(True)  # False where the CPU cannot
        try:
            self._setup(runner.observation_space, runner.action_space, ctx)
            assert self.learner is not None and self.replay is not None
            replay, learner, buffer = self.replay, self.learner, self.replay.buffer
            warm_up = min(max(cfg.learning_starts, cfg.batch_size), int(buffer.capacity))
            if ctx.start_step > 0 and len(buffer) < warm_up:
                _say_the_warm_up_again(ctx.start_step, ctx.total_steps, warm_up, len(buffer))
            elif ctx.start_step == 0 and warm_up >= ctx.total_steps:
                log.warning(
                    "training starts once the replay holds %d transitions (agent.learning_starts=%d, "
                    "agent.batch_size=%d), and this run ends at step %d: it trains nothing "
                    "(raise total_steps)",
                    warm_up, cfg.learning_starts, cfg.batch_size, ctx.total_steps,
                )  # fmt: skip
            obs = runner.reset()
            for i, row in enumerate(obs):
                replay.start(i, row)
            step = previous = self.step = ctx.start_step
            since_train = 0
            while step < ctx.total_steps:
                actions = self._explore(obs, step)
                next_obs, rewards, terminated, finals = runner.step(actions)
                for i in range(runner.n):
                    final = finals.get(i)
                    last = next_obs[i] if final is None else final  # the real last observation
                    replay.add(i, obs[i], actions[i], rewards[i], last, terminated[i])
                    if final is not None:
                        replay.start(i, next_obs[i])
                obs = next_obs
                previous, step = step, step + runner.n
                self.step = step
                since_train += runner.n
                if _crossed(previous, step, cfg.target_update_interval):
                    learner.sync_target(cfg.tau)
                if _crossed(previous, step, cfg.train_freq):
                    if len(buffer) >= warm_up:
                        learner.set_learning_rate(self.learning_rate(step))
                        n = cfg.gradient_steps if cfg.gradient_steps > 0 else since_train
                        learner.train_phase(buffer.sample(cfg.batch_size * n), cfg.batch_size)
                    since_train = 0
                if _crossed(previous, step, cfg.log_every_steps):
                    self._log(ctx, runner, step)
                if not ctx.after_step(step, self):
                    break
            if not _crossed(previous, step, cfg.log_every_steps):  # the rest since the last log
                self._log(ctx, runner, step)
        finally:
            runner.close()
            if flushing:
                torch.set_flush_denormal(False)  # the process's default again

    def check_run(self, *, env: EnvPlugin, buffer: Optional[Buffer], parts: Mapping[str, object]) -> None:
        """Before the run starts: a selected buffer this agent's settings cannot fill, and an env
        whose spaces it cannot train on (where the env plugin says them), are refused."""
        check_buffer(buffer, buffer_size=self.cfg.buffer_size, n_envs=env.n_envs, n_step=self.cfg.n_step)
        if isinstance(env, SpacesEnvPlugin):
            check_spaces(*env.spaces())
            check_frames(buffer, env.spaces()[0].shape or ())

    def _setup(self, observation_space: gym.Space, action_space: gym.Space, ctx: RunContext) -> None:
        """Networks, optimizer, schedules and replay for this run (restored when resuming)."""
        check_spaces(observation_space, action_space)
        assert isinstance(action_space, gym.spaces.Discrete)
        spaces: Dict[str, Any] = {
            "obs_shape": list(observation_space.shape or ()),
            "obs_dtype": str(observation_space.dtype),
            "n_actions": int(action_space.n),
        }
        if self.spaces and self.spaces != spaces:
            raise ValueError(f"The checkpoint was trained on {self.spaces}, this env has {spaces}")
        self.spaces = spaces
        self.learner = self._build_learner(ctx.device)
        if self._restored is not None:
            self.learner.load_state_dict(self._restored)
            self.learner.n_updates = int(self._restored["n_updates"])
            torch.set_rng_state(self._restored["torch_rng"])
            self._restored = None
        else:
            self.rng = np.random.default_rng(ctx.seed)
        total = ctx.total_steps
        self.epsilon = build_schedule(self.cfg.exploration, name="agent.exploration", total_steps=total)
        self.learning_rate = build_schedule(
            self.cfg.learning_rate, name="agent.learning_rate", total_steps=total
        )
        self.replay = make_replay(
            ctx.buffer,
            buffer_size=self.cfg.buffer_size,
            obs_shape=tuple(spaces["obs_shape"]),
            n_envs=ctx.n_envs,
            seed=ctx.seed + ctx.start_step,
            n_step=self.cfg.n_step,
            gamma=self.cfg.gamma,
        )
        if self._restored_buffer is not None:
            with np.load(self._restored_buffer, allow_pickle=False) as saved:
                self.replay.buffer.load_state_dict({key: saved[key] for key in saved.files})
            self._restored_buffer = None

    def _build_learner(self, device: str) -> QLearner:
        cfg = self.cfg
        network = build_q_network(
            cfg.network,
            self.spaces["obs_shape"],
            self.spaces["obs_dtype"],
            self.spaces["n_actions"],
            hidden_sizes=cfg.hidden_sizes,
            activation=cfg.activation,
            dueling=cfg.dueling,
        )
        return QLearner(
            network,
            device=device,
            gamma=cfg.gamma**cfg.n_step,
            double_q=cfg.double_q,
            loss=cfg.loss,
            max_grad_norm=cfg.max_grad_norm,
            adam_eps=cfg.adam_eps,
        )

    def _explore(self, obs: np.ndarray, step: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """ε-greedy actions for a batch of observations; uniformly random before learning_starts."""
        n, n_actions = len(obs), self.spaces["n_actions"]
        rng = rng or self.rng
        if step < self.cfg.learning_starts:
            return rng.integers(n_actions, size=n)
        explore = rng.random(n) < self.epsilon(step)
        if explore.all():
            return rng.integers(n_actions, size=n)
        assert self.learner is not None
        actions = self.learner.greedy(obs)
        if explore.any():
            actions[explore] = rng.integers(n_actions, size=int(explore.sum()))
        return actions

    def _log(self, ctx: RunContext, runner: EnvRunner, step: int) -> None:
        assert self.learner is not None
        metrics = {
            **self.learner.pop_stats(),
            "train/epsilon": self.epsilon(step),
            "train/learning_rate": self.learning_rate(step),
            "train/n_updates": float(self.learner.n_updates),
            **runner.metrics(),
        }
        ctx.log_metrics(metrics, step)

    def act(self, obs: Any, *, deterministic: bool = True) -> Any:
        if self.learner is None:
            raise RuntimeError("DQNAgent.act() before learn() or load()")
        batch = np.asarray(obs)[None]
        if not deterministic:  # as in training, with ε at the current step, from numpy's generator
            # (an evaluation seeds it alike each time, and draws nothing from training's own, self.rng)
            return int(self._explore(batch, self.step, np.random.default_rng(np.random.randint(2**31)))[0])
        return int(self.learner.greedy(batch)[0])

    def save(self, path: Path) -> None:
        if self.learner is None:
            raise RuntimeError("DQNAgent.save() before learn() or load(): there is nothing to save")
        torch.save({**self.learner.state_dict(), "torch_rng": torch.get_rng_state()}, path / WEIGHTS_FILE)
        state = {
            "spaces": self.spaces,
            "step": self.step,
            "n_updates": self.learner.n_updates,
            "rng": self.rng.bit_generator.state,
            "episodes": self._runner.window() if self._runner is not None else self._restored_window,
        }
        (path / STATE_FILE).write_text(json.dumps(state, indent=1))
        if self.cfg.save_buffer and self.replay is not None:
            arrays: Dict[str, Any] = self.replay.buffer.state_dict()
            np.savez(path / BUFFER_FILE, **arrays)

    def load(self, path: Path) -> None:
        if not (path / WEIGHTS_FILE).is_file() or not (path / STATE_FILE).is_file():
            raise FileNotFoundError(f"No DQN checkpoint ({WEIGHTS_FILE}, {STATE_FILE}) in {path}")
        state = json.loads((path / STATE_FILE).read_text())
        weights = torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        self.spaces = state["spaces"]
        self.step = int(state["step"])
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]
        self._restored_window = state.get("episodes", {})  # a checkpoint written before it: none
        self.learner = self._build_learner("cpu")  # for act() until learn() rebuilds it on its device
        self.learner.load_state_dict(weights)
        self.learner.n_updates = int(state["n_updates"])
        self._restored = {**weights, "n_updates": self.learner.n_updates}
        self._restored_buffer = path / BUFFER_FILE if (path / BUFFER_FILE).is_file() else None


def check_spaces(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
    """DQN's Q-network reads Box observations (a vector, or image frames) and scores each of a
    Discrete action space's actions: anything else is refused, naming what to choose instead."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(
            f"agent=dqn needs a discrete action space, and this env's is {action_space}: choose an agent "
            "for continuous actions (agent=sac, agent=td3) or an env with discrete actions (LunarLander's "
            "env.continuous=false, CartPole)"
        )
    if not isinstance(observation_space, gym.spaces.Box):
        also = (
            ", or an SB3 agent (agent=ppo one-hot encodes Discrete observations)"
            if isinstance(observation_space, gym.spaces.Discrete)
            else ""
        )
        raise ConfigError(
            f"agent=dqn reads Box observations (a vector, or image frames), and this env's are "
            f"{observation_space}: choose an env with Box observations (or wrap this one so that it "
            f"has them){also}"
        )


def _say_the_warm_up_again(start: int, total: int, warm_up: int, held: int) -> None:
    """A resume without its replay (saved with agent.save_buffer=true only) trains again once the
    buffer holds `warm_up` transitions: said, and said louder where the run ends before that."""
    restart = start + warm_up - held
    why = (
        f"resumed at step {start} without its replay buffer (checkpoints keep it with "
        f"agent.save_buffer=true): training starts again once it holds {warm_up} transitions, at step "
        f"{restart}"
    )
    if restart >= total:
        log.warning("%s, and this run ends at step %d: it trains nothing (raise total_steps)", why, total)
    else:
        log.info(why)


def _crossed(previous: int, step: int, every: int) -> bool:
    """True when `step` reached a multiple of `every` that `previous` had not."""
    return step // every > previous // every


def _validate(cfg: DQNConfig) -> None:
    """Config values the schema's types do not check, each failing with the valid choices."""
    check_choice("agent.network", cfg.network, NETWORKS)
    check_choice("agent.loss", cfg.loss, LOSSES)
    activation_name(cfg.activation)
    check_at_least(
        "agent",
        cfg,
        1,
        "batch_size",
        "train_freq",
        "target_update_interval",
        "log_every_steps",
        "buffer_size",
        "n_step",
    )
    if cfg.gradient_steps < 1 and cfg.gradient_steps != -1:
        raise ConfigError(f"agent.gradient_steps={cfg.gradient_steps} must be >= 1, or -1 (one per env step)")
    if cfg.learning_starts < 0:
        raise ConfigError(f"agent.learning_starts={cfg.learning_starts} must be >= 0")
    if not 0.0 < cfg.tau <= 1.0:
        raise ConfigError(f"agent.tau={cfg.tau} must be in (0, 1]")
    if not 0.0 <= cfg.gamma <= 1.0:
        raise ConfigError(f"agent.gamma={cfg.gamma} must be in [0, 1]")
    if cfg.max_grad_norm is not None and cfg.max_grad_norm <= 0:
        raise ConfigError(f"agent.max_grad_norm={cfg.max_grad_norm} must be > 0, or null for no clipping")


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    _dqnagent_contract: type[CheckedAgent] = DQNAgent
