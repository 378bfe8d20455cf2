"""The SB3 adapter: one agent plugin that runs any Stable-Baselines3 algorithm."""

import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import numpy as np
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from framework.contracts import Buffer, EnvPlugin, RunContext, SpacesEnvPlugin
from framework.errors import ConfigError, check_choice

from .algorithms import (
    algorithm_class,
    build_kwargs,
    check_hyperparams,
    check_spaces,
    default_policy,
    space_mismatch,
)
from .bridge import FrameworkCallback, tracker_logger
from .config import VEC_ENVS, SB3Config
from .minibatch import minibatch, set_on_the_command_line
from .vec_env import make_vec_env

MODEL_FILE = "model.zip"
REPLAY_FILE = "replay_buffer.pkl"
#: The tag that records the mini-batch size a preset's batch_size followed to (`minibatch`).
BATCH_SIZE_TAG = "sb3.batch_size_used"
log = logging.getLogger(__name__)


class SB3Agent:
    """Any Stable-Baselines3 algorithm, with tuned hyperparameters per env from conf/tuned."""

    Config: ClassVar[type] = SB3Config

    def __init__(self, cfg: SB3Config) -> None:
        self.cfg = cfg
        self.algo_cls = algorithm_class(cfg.algo)
        check_choice("agent.vec_env", cfg.vec_env, VEC_ENVS)
        check_hyperparams(self.algo_cls, cfg.hyperparams, cfg.policy, cfg.policy_kwargs)
        self.model: Any = None
        self._load_from: Optional[Path] = None

    def check_run(self, *, env: EnvPlugin, buffer: Optional[Buffer], parts: Mapping[str, object]) -> None:
        """Refuse a buffer section, which SB3 would never read, a rollout SB3 cannot normalise, a
        batch_size set on the command line that does not divide the rollout (`minibatch`), and an
        env whose spaces the algorithm does not take."""
        algo = self.algo_cls.__name__
        if buffer is not None:
            own = (
                "replay buffer (agent.hyperparams.buffer_size)"
                if issubclass(self.algo_cls, OffPolicyAlgorithm)
                else "rollouts (agent.hyperparams.n_steps per env), and no replay buffer"
            )
            raise ConfigError(
                f"agent.algo={algo} keeps its own {own}: it never reads the buffer section; drop "
                "buffer= (~buffer). A buffer is for an agent that trains from the run's buffer (agent=dqn)"
            )
        hyperparams = self.cfg.hyperparams
        defaults = {n: p.default for n, p in inspect.signature(self.algo_cls.__init__).parameters.items()}
        n_steps = hyperparams.get("n_steps", defaults.get("n_steps"))
        normalize = hyperparams.get("normalize_advantage", defaults.get("normalize_advantage"))
        rollout = "rollout_buffer_class" in defaults  # on-policy: n_steps per env make a rollout
        if rollout and normalize is True and isinstance(n_steps, int) and n_steps * env.n_envs <= 1:
            raise ConfigError(
                f"agent.hyperparams.n_steps={n_steps} with env.n_envs={env.n_envs} makes rollouts of "
                f"{n_steps * env.n_envs} step, which {algo} cannot normalise advantages over "
                "(agent.hyperparams.normalize_advantage=true): make n_steps x n_envs at least 2"
            )
        minibatch(self.algo_cls, hyperparams, env.n_envs, explicit=set_on_the_command_line())
        if isinstance(env, SpacesEnvPlugin):
            observations, actions = env.spaces()
            policy = (
                self.cfg.policy if self.cfg.policy != "auto" else default_policy(observations, self.algo_cls)
            )
            check_spaces(self.algo_cls, observations, actions, policy, {})  # first: no hyperparameter's
            built = build_kwargs(self.cfg.hyperparams, self.cfg.policy_kwargs, actions)
            check_spaces(self.algo_cls, observations, actions, policy, built.get("policy_kwargs", {}))

    def learn(self, ctx: RunContext) -> None:
        # A resumed part seeds its envs and its own sampling past the steps done (seed plus a count, as
        # every training seed is): it does not replay its first part's episode starts and noise.
        venv = make_vec_env(ctx.env_plugin, ctx.n_envs, seed=ctx.seed + ctx.start_step, kind=self.cfg.vec_env)
        try:  # from here on the envs are closed on every way out (their clients, browsers, pages)
            self._learn(ctx, venv)
        finally:
            venv.close()

    def _learn(self, ctx: RunContext, venv: Any) -> None:
        fresh = self._load_from is None
        if fresh:
            auto = default_policy(venv.observation_space, self.algo_cls)
            policy = self.cfg.policy if self.cfg.policy != "auto" else auto
            built = build_kwargs(self.cfg.hyperparams, self.cfg.policy_kwargs, venv.action_space)
            batch = minibatch(self.algo_cls, self.cfg.hyperparams, venv.num_envs, explicit=False)
            if batch is not None and batch.note:  # a preset's, tuned for another env.n_envs
                log.info(batch.note)
                ctx.tracker.set_tags({BATCH_SIZE_TAG: str(batch.batch_size)})
                built["batch_size"] = batch.batch_size
            try:
                self.model = self.algo_cls(policy, venv, seed=ctx.seed, device=ctx.device, verbose=0, **built)
            except AssertionError as e:  # SB3 checks spaces with asserts
                raise ConfigError(space_mismatch(self.algo_cls, venv, e)) from None
            except NotImplementedError as e:  # a space none of its policies reads (Tuple)
                raise ConfigError(
                    f"agent.algo={self.algo_cls.__name__} cannot learn on this env's observations, "
                    f"{venv.observation_space}: {e}"
                ) from None
        else:
            self._restore(venv, ctx.device)
            kept = self._load_from is not None and (self._load_from / REPLAY_FILE).is_file()
            if isinstance(self.model, OffPolicyAlgorithm) and not kept:
                self._warm_up_again(int(self.model.num_timesteps), ctx.total_steps)
        self.model.set_random_seed(ctx.seed + ctx.start_step)
        self.model.set_logger(tracker_logger(ctx.tracker))
        remaining = ctx.total_steps - int(self.model.num_timesteps)
        kwargs = {} if self.cfg.log_interval is None else {"log_interval": self.cfg.log_interval}
        starts = int(getattr(self.model, "learning_starts", 0) or 0)  # off-policy: random acting until then
        if fresh and starts >= ctx.total_steps:
            log.warning(
                "training starts at step %d (agent.hyperparams.learning_starts), and this run ends at step "
                "%d: it trains nothing (raise total_steps)", starts, ctx.total_steps,
            )  # fmt: skip
        rollout = int(getattr(self.model, "n_steps", 0)) * venv.num_envs  # on-policy: it trains whole ones
        if 0 < remaining < rollout:
            log.warning(
                "one rollout is %d steps (agent.hyperparams.n_steps=%d x env.n_envs=%d), more than the %d "
                "left of total_steps=%d: the run trains %d",
                rollout, self.model.n_steps, venv.num_envs, remaining, ctx.total_steps,
                int(self.model.num_timesteps) + rollout,
            )  # fmt: skip
        if remaining > 0:
            self.model.learn(
                total_timesteps=remaining,
                callback=FrameworkCallback(ctx, self),
                reset_num_timesteps=fresh,
                **kwargs,
            )

    def act(self, obs: Any, *, deterministic: bool = True) -> Any:
        if self.model is None:
            self._restore(None, "auto")
        action, _ = self.model.predict(obs, deterministic=deterministic)
        if np.ndim(action) == 0 and np.issubdtype(np.asarray(action).dtype, np.integer):
            return int(action)  # a Discrete space's action, as an env's own step takes it (a dict key, say)
        return action

    def save(self, path: Path) -> None:
        self.model.save(path / MODEL_FILE)
        if self.cfg.save_replay_buffer and isinstance(self.model, OffPolicyAlgorithm):
            self.model.save_replay_buffer(path / REPLAY_FILE)

    def load(self, path: Path) -> None:
        if not (path / MODEL_FILE).is_file():
            raise FileNotFoundError(f"No SB3 model at {path / MODEL_FILE}")
        self._load_from = path

    def _warm_up_again(self, step: int, total_steps: int) -> None:
        """A resumed off-policy run whose checkpoint holds no replay buffer gathers learning_starts
        transitions again before it trains (as our DQN does), rather than training on a few."""
        given = self.cfg.hyperparams.get("learning_starts")
        default = inspect.signature(self.algo_cls.__init__).parameters["learning_starts"].default
        starts = int(given if given is not None else default)
        assert self.model is not None
        self.model.learning_starts = step + starts
        log.warning(
            "the checkpoint holds no replay buffer (agent.save_replay_buffer=false): the run gathers "
            "learning_starts=%d transitions again, acting at random, and trains from step %d%s",
            starts, step + starts, "" if step + starts < total_steps else ", past its end: it trains no more",
        )  # fmt: skip

    def _restore(self, venv: Any, device: str) -> None:
        assert self._load_from is not None, "act() before learn() or load()"
        self.model = self.algo_cls.load(self._load_from / MODEL_FILE, env=venv, device=device)
        if (self._load_from / REPLAY_FILE).is_file() and isinstance(self.model, OffPolicyAlgorithm):
            self.model.load_replay_buffer(self._load_from / REPLAY_FILE)


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import CheckedAgent

    _sb3agent_contract: type[CheckedAgent] = SB3Agent
