"""RunContext: what the core hands an agent — config, seeds, envs and the run's services."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from omegaconf import DictConfig

from framework.checkpoint import Checkpointer, read_state
from framework.contracts import (
    Agent,
    BestEpisodeReplay,
    Buffer,
    EnvPlugin,
    EvaluatingAgent,
    RunPart,
    Tracker,
    VariantEnvPlugin,
)
from framework.errors import ExplainedError
from framework.evaluation import (
    Episodes,
    evaluation_seed,
    own_randomness,
    play_episodes,
    record_video,
    summarize,
    untrained_metrics,
)
from framework.progress import ProgressDisplay

if TYPE_CHECKING:
    import gymnasium as gym

    from framework.contracts.sweeper import Trial

log = logging.getLogger("framework")


@dataclass
class RunContext:
    """The resolved run: typed plugin configs, seeded RNG, env factory and services."""

    cfg: DictConfig
    env_plugin: EnvPlugin
    seed: int
    rng: np.random.Generator
    device: str
    total_steps: int
    tracker: Tracker
    checkpointer: Checkpointer
    progress: ProgressDisplay
    run_dir: Path
    start_step: int = 0
    buffer: Buffer | None = None
    parts: dict[str, RunPart] = field(default_factory=dict)
    """What the run holds of each added kind's plugin, by kind (`search`: the run's searches)."""
    stop: threading.Event = field(default_factory=threading.Event)
    resume_from: Path | None = None
    trial: Trial | None = None
    """The trial this run is in a sweeper plugin's sweep: evaluations are reported to it."""
    last_eval: dict[str, float] = field(default_factory=dict)
    last_eval_step: int = 0
    _eval_env: gym.Env | None = None
    _last_step: int = 0
    _perf_mark: tuple[float, int] = (0.0, 0)
    _eval_every: int = 0
    _eval_at_start: bool = False
    _eval_missed: bool = False
    _objective_missing_said: bool = False

    def __post_init__(self) -> None:
        self._last_step = self.start_step
        self._perf_mark = (0.0, self.start_step)  # set at the first step: the run's start-up is no step
        # Read once: a DictConfig lookup costs ~28 µs, more than a CartPole env step.
        self._eval_every = int(self.cfg.eval.every_steps)
        self._eval_at_start = bool(self.cfg.eval.get("at_start", False)) and self.start_step == 0
        # A run stopped on an evaluation's step gave that evaluation up: it is made as the run goes on.
        if self.resume_from is not None and self._eval_every > 0 and self.start_step % self._eval_every == 0:
            evaluated = read_state(self.resume_from).get("last_eval_step", self.start_step)
            self._eval_missed = int(evaluated) < self.start_step

    @property
    def run_id(self) -> str:
        """The tracked run's id (waits, with a timeout, until the tracker has created the run)."""
        return str(self.tracker.run_id)

    @property
    def n_envs(self) -> int:
        return int(self.env_plugin.n_envs)

    def make_env(
        self, index: int = 0, *, evaluation: bool = False, render_mode: str | None = None
    ) -> gym.Env:
        """A new env: a training one seeded `seed + index`, an evaluation one with `evaluation_seed`."""
        import gymnasium as gym

        seed = evaluation_seed(self.seed) if evaluation else self.seed + index
        env = self.env_plugin.make(seed=seed, index=index, evaluation=evaluation, render_mode=render_mode)
        if not isinstance(env, gym.Env):
            raise ExplainedError(
                f"env={self.cfg.env.name}: its make() returned {type(env).__name__}, not a gymnasium.Env "
                "(framework.contracts.EnvPlugin)"
            )
        return env

    def interrupt_parts(self) -> None:
        """End what the run's parts have under way (the run is stopping), not after its simulations."""
        for part in self.parts.values():
            part.interrupt()

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.tracker.log_metrics(metrics, step)

    def after_step(self, step: int, agent: Agent) -> bool:
        """Call whenever steps advanced, with the total so far: progress, evaluation, checkpoints.
        False = stop."""
        previous, self._last_step = self._last_step, step
        if step < previous:  # a plugin's bug: its curves and checkpoints would go back in time
            raise ExplainedError(
                f"agent={self.cfg.agent.name}: ctx.after_step({step}) after ctx.after_step({previous}); the "
                "step is the run's total so far, which never goes back (framework.contracts)"
            )
        due = self.progress.update(step)
        if not self._perf_mark[0]:
            self._perf_mark = (time.perf_counter(), step)
        if self._eval_at_start:  # the untrained agent, logged at step 0 (see EvalConfig.at_start)
            self._eval_at_start = False
            self.evaluate(agent, 0, before_training=True)
        if self._eval_missed and self.start_step < self.total_steps:
            self._eval_missed = False
            self.evaluate(agent, self.start_step)
        if due:
            now = time.perf_counter()
            t0, s0 = self._perf_mark
            if now > t0 and step > s0:
                self.log_metrics({"perf/env_steps_per_s": (step - s0) / (now - t0)}, step)
            self._perf_mark = (now, step)
        every = self._eval_every
        if every > 0 and step // every > previous // every and step < self.total_steps:
            self.evaluate(agent, step)
        if self.checkpointer.due(step, previous):
            self.save_checkpoint(step, agent)
        return not self.stop.is_set()

    def evaluate(
        self, agent: Agent, step: int, *, video_dir: Path | None = None, before_training: bool = False
    ) -> dict[str, float]:
        """The agent's evaluation, logged as eval/* at `step` (each eval variant's as eval/<variant>/*,
        pooled as eval/*); `before_training`: the untrained agent's, logged as eval_untrained/* only."""
        episodes = int(self.cfg.eval.episodes)
        if episodes == 0:
            return {}
        if isinstance(agent, EvaluatingAgent):  # its own evaluation, seeded its own way
            metrics = agent.evaluate(self, episodes=episodes)
        else:
            with own_randomness(self.seed):  # each evaluation samples alike, taking nothing from training
                if isinstance(self.env_plugin, VariantEnvPlugin) and self.env_plugin.eval_variants:
                    metrics = self._episodes_on_variants(self.env_plugin, agent, episodes, video_dir)
                else:
                    metrics = self._episodes_on_eval_env(agent, episodes, video_dir)
        if not metrics or self.stop.is_set():  # given up because the run is stopping (Ctrl-C, SIGTERM)
            return {}
        objective = str(self.cfg.objective.metric) if "objective" in self.cfg else ""
        if objective and objective not in metrics and not self._objective_missing_said:
            self._objective_missing_said = True
            log.warning(
                "objective.metric=%s is not among this run's evaluation metrics: %s",
                objective,
                ", ".join(sorted(metrics)),
            )
        # The objective first, for a view that lists metrics as logged.
        ordered = dict(sorted(metrics.items(), key=lambda item: item[0] != objective))
        if before_training:
            # Not the objective: a lucky untrained policy (PPO's on CartPole can score 500) would
            # start every curve high, and a pruner would never prune its trial.
            untrained = untrained_metrics(ordered)
            self.log_metrics(untrained, step)
            self.progress.set_eval(untrained, untrained=True)
            return untrained
        self.last_eval, self.last_eval_step = metrics, step
        self.log_metrics(ordered, step)
        self.progress.set_eval(metrics)
        if self.trial is not None and self.trial.report(metrics, step, final=step >= self.total_steps):
            self.stop.set()  # pruned: the run ends here (see framework.contracts.sweeper)
        return metrics

    def _episodes(self, agent: Agent, env: gym.Env, episodes: int) -> Episodes:
        deterministic = bool(self.cfg.eval.deterministic)
        return play_episodes(
            lambda obs: agent.act(obs, deterministic=deterministic),
            env,
            episodes=episodes,
            seed=evaluation_seed(self.seed),
            stop=self.stop,
        )

    def _episodes_on_variants(
        self, plugin: VariantEnvPlugin, agent: Agent, episodes: int, video_dir: Path | None
    ) -> dict[str, float]:
        metrics: dict[str, float] = {}
        # Pooled too, so that eval/return_mean (the default objective) means the same for every env.
        pooled = Episodes()
        replays = False
        for variant in plugin.eval_variants:
            env = plugin.make_variant(variant, seed=evaluation_seed(self.seed))
            try:
                replay = env if video_dir is not None and isinstance(env, BestEpisodeReplay) else None
                if replay is not None:
                    replay.keep_best_episode()
                found = self._episodes(agent, env, episodes)
                if replay is not None and video_dir is not None:
                    replay.write_best_episode(video_dir, f"best-{variant}")
                    replays = True
            finally:
                env.close()
            metrics.update(summarize(found, f"eval/{variant}"))
            pooled.extend(found)
        if video_dir is not None and not replays:  # variants that cannot replay: a recorded eval env
            self._episodes_on_eval_env(agent, int(self.cfg.eval.video_episodes), video_dir)
        metrics.update(summarize(pooled))
        return metrics

    def _episodes_on_eval_env(self, agent: Agent, episodes: int, video_dir: Path | None) -> dict[str, float]:
        made = self._rendering_env() if video_dir is not None else None
        if made is not None and video_dir is not None:
            if isinstance(made, BestEpisodeReplay):
                try:
                    made.keep_best_episode()
                    found = self._episodes(agent, made, episodes)
                    made.write_best_episode(video_dir, "best")
                    return summarize(found)
                finally:
                    made.close()
            env = record_video(made, video_dir, int(self.cfg.eval.video_episodes))
            try:
                return summarize(self._episodes(agent, env, episodes))
            finally:
                env.close()
        if self._eval_env is None:
            self._eval_env = self.make_env(0, evaluation=True)
        return summarize(self._episodes(agent, self._eval_env, episodes))

    def _rendering_env(self) -> gym.Env | None:
        """An evaluation env drawing `rgb_array` frames; None, said, where the env cannot draw them (the
        evaluation goes on without a video, rather than the run failing after its training)."""
        try:
            made = self.make_env(0, evaluation=True, render_mode="rgb_array")
        except Exception as e:  # gymnasium's, or the plugin's own refusal of the render mode
            problem = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        else:
            if getattr(made, "render_mode", "rgb_array") == "rgb_array":
                return made
            problem = f"its env's render_mode is {made.render_mode!r}"
            made.close()
        log.warning(
            "eval.video=true: env=%s cannot draw rgb_array frames (%s); evaluated without a video",
            self.cfg.env.name,
            problem,
        )
        return None

    def save_checkpoint(self, step: int, agent: Agent) -> Path:
        return self.checkpointer.save(
            step,
            agent.save,
            {
                "run_id": self.run_id,
                "seed": self.seed,
                "last_eval": self.last_eval,
                "last_eval_step": self.last_eval_step,
            },
        )

    def close(self) -> None:
        """Release what the run holds: its parts (searches and their service), the eval env, the display."""
        parts, self.parts = self.parts, {}
        for name, part in parts.items():
            try:
                part.close()
            except Exception:
                log.exception("could not close the run's %s", name)
        if self._eval_env is not None:
            self._eval_env.close()
            self._eval_env = None
        self.progress.close()
