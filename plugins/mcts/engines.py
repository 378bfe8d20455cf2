"""The search plugins: `search=sequential` and `search=ray_async`.

Each is a config, an inference service it starts for the run (once), and PUCT searches over that
service (`make`): the same `PuctSearch`, given the service's way of evaluating leaves. Neither
derives from the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from framework.errors import ConfigError, check_at_least, check_choice
from framework.schedules import build_schedule
from framework_plugins.boardgames import BEST

from .config import BACKENDS, ROOTS, RayAsyncConfig, SequentialConfig
from .puct import PuctSearch
from .service import LocalInference, RayInference, RayServiceAddress

if TYPE_CHECKING:
    from framework_plugins.boardgames import BoardGame, DistributedSearch, Evaluator, SearchPlugin


class SequentialSearch:
    """PUCT over array trees; the leaves of all the roots evaluated together in the run's process."""

    Config: ClassVar[type] = SequentialConfig

    def __init__(self, cfg: SequentialConfig) -> None:
        validate_search(cfg)
        self.cfg = cfg

    def start_inference(
        self,
        source: Callable[[], Evaluator],
        *,
        device: str,
        threads: int = 1,
        should_stop: Callable[[], bool],
    ) -> LocalInference:
        return LocalInference(source, device=device, backend=self.cfg.inference.backend, threads=threads)

    def make(self, *, game: BoardGame, inference: Any, model: str = BEST, seed: int) -> PuctSearch:
        return PuctSearch(self.cfg, game=game, evaluation=inference.evaluation(model), seed=seed)

    @property
    def draw_contempt(self) -> float:
        return float(self.cfg.draw_contempt)


class RayAsyncSearch:
    """PUCT with virtual loss; leaves batched to Ray inference actors, pipelined; workers may join them."""

    Config: ClassVar[type] = RayAsyncConfig

    def __init__(self, cfg: RayAsyncConfig) -> None:
        validate_search(cfg)
        validate_ray_async(cfg)
        self.cfg = cfg
        self.workers = Workers()
        """The processes an agent will start beside the service (its self-play workers)."""
        check_resources(cfg, self.workers)

    def start_inference(
        self,
        source: Callable[[], Evaluator],
        *,
        device: str,
        threads: int = 1,
        should_stop: Callable[[], bool],
    ) -> RayInference:
        from framework_plugins.ray_runtime import runtime as ray_runtime

        cfg = self.cfg
        ray_runtime.ensure(min_cpus=self.workers.cpus + cfg.inference_actors * cfg.inference_num_cpus)
        return RayInference.start(cfg, source, should_stop=should_stop)

    def make(self, *, game: BoardGame, inference: Any, model: str = BEST, seed: int) -> PuctSearch:
        return PuctSearch(self.cfg, game=game, evaluation=inference.evaluation(model), seed=seed)

    @property
    def draw_contempt(self) -> float:
        return float(self.cfg.draw_contempt)

    def expect_workers(self, count: int, *, num_cpus: float, keys: str) -> None:
        self.workers = Workers(count, num_cpus, keys)
        check_resources(self.cfg, self.workers)

    def join(
        self, address: RayServiceAddress, *, game: BoardGame, model: str = BEST, seed: int
    ) -> PuctSearch:
        """In another process (a self-play worker): a search over the run's inference service at
        `address` (its `address`), with `model`'s weights."""
        return self.make(game=game, inference=RayInference.join(self.cfg, address), model=model, seed=seed)


#: What a self-play worker and an inference actor hold in memory, about (torch, numba, the trees).
WORKER_MEMORY, ACTOR_MEMORY = 450 << 20, 500 << 20


@dataclasses.dataclass(frozen=True)
class Workers:
    """Processes an agent starts beside the inference service (DistributedSearch.expect_workers)."""

    count: int = 0
    num_cpus: float = 0.0
    keys: str = ""
    """The settings that ask for them (agent.workers=4 agent.worker_num_cpus=1)."""

    @property
    def cpus(self) -> float:
        return self.count * self.num_cpus


def check_resources(cfg: RayAsyncConfig, workers: Workers) -> None:
    """Refuse, before anything starts, workers and inference actors the run's Ray cannot hold."""
    from framework_plugins.ray_runtime import runtime as ray_runtime

    gpus_each = cfg.inference_num_gpus or 0.0
    actors = f"{cfg.inference_actors} inference actor(s)"
    keys = f"search.inference_actors={cfg.inference_actors} "
    keys += f"search.inference_num_cpus={cfg.inference_num_cpus:g}"
    if gpus_each:
        keys += f" search.inference_num_gpus={gpus_each:g}"
    ray_runtime.check_capacity(
        cpus=workers.cpus + cfg.inference_actors * cfg.inference_num_cpus,
        gpus=cfg.inference_actors * gpus_each,
        memory_bytes=workers.count * WORKER_MEMORY + cfg.inference_actors * ACTOR_MEMORY,
        what=f"{workers.count} self-play worker(s) and {actors}" if workers.count else actors,
        keys=f"{workers.keys} {keys}" if workers.count else keys,
    )


def validate_search(cfg: SequentialConfig) -> None:
    check_choice("search.inference.backend", cfg.inference.backend, BACKENDS)
    check_choice("search.root", cfg.root, ROOTS)
    check_at_least("search", cfg, 1, "gumbel_considered")
    check_at_least("search", cfg, 0, "gumbel_c_visit")
    if cfg.gumbel_c_scale <= 0:
        raise ConfigError(f"search.gumbel_c_scale={cfg.gumbel_c_scale:g} must be > 0")
    for key, low, high in (("num_simulations", 1, None), ("dirichlet_epsilon", 0.0, 1.0)):
        try:
            schedule = build_schedule(getattr(cfg, key), name=f"search.{key}", total_steps=1)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        for value in (schedule(0), schedule(2**62)):
            if value < low or (high is not None and value > high):
                where = f"[{low}, {high}]" if high is not None else f">= {low}"
                raise ConfigError(f"search.{key}={getattr(cfg, key)} must be {where} (it reaches {value:g})")
    if cfg.c_puct <= 0:
        raise ConfigError(f"search.c_puct={cfg.c_puct} must be > 0")
    if cfg.fpu_value is not None and not -1.0 <= cfg.fpu_value <= 1.0:
        raise ConfigError(
            f"search.fpu_value={cfg.fpu_value} must be in [-1, 1], or null (its parent's value)"
        )
    if cfg.pipeline_groups is not None and cfg.pipeline_groups < 1:
        raise ConfigError(
            f"search.pipeline_groups={cfg.pipeline_groups} must be >= 1, or null (2 on a GPU, 1 on a CPU)"
        )
    if cfg.dirichlet_alpha <= 0:
        raise ConfigError(f"search.dirichlet_alpha={cfg.dirichlet_alpha} must be > 0")
    if not 0.0 <= cfg.draw_contempt <= 1.0:
        raise ConfigError(f"search.draw_contempt={cfg.draw_contempt} must be in [0, 1]")


def validate_ray_async(cfg: RayAsyncConfig) -> None:
    check_at_least("search", cfg, 1, "batch_size", "max_inflight_batches", "inference_actors")
    if cfg.async_inflight_limit is not None and cfg.async_inflight_limit < 1:
        raise ConfigError(
            f"search.async_inflight_limit={cfg.async_inflight_limit} must be >= 1, "
            "or null (one batch per root)"
        )
    check_at_least("search", cfg, 0, "max_wait_ms", "virtual_loss", "max_restarts")
    if cfg.inference_num_cpus <= 0:
        raise ConfigError(f"search.inference_num_cpus={cfg.inference_num_cpus:g} must be > 0")
    if cfg.inference_num_gpus is not None and cfg.inference_num_gpus < 0:
        raise ConfigError(f"search.inference_num_gpus={cfg.inference_num_gpus} must be >= 0, or null (auto)")
    if cfg.inference_timeout_s <= 0:
        raise ConfigError(f"search.inference_timeout_s={cfg.inference_timeout_s} must be > 0")


if TYPE_CHECKING:
    _sequential_contract: type[SearchPlugin] = SequentialSearch
    _ray_async_contract: type[SearchPlugin] = RayAsyncSearch
    _distributed: type[DistributedSearch] = RayAsyncSearch


def local_search(
    cfg: SequentialConfig,
    *,
    game: BoardGame,
    evaluator_factory: Callable[[], Evaluator],
    seed: int,
    threads: int = 1,
    device: str = "cpu",
) -> PuctSearch:
    """A search=sequential search over an in-process service of its own (an opponent, a benchmark,
    a test): the evaluator the factory makes, as it is, its trees walked on `threads` threads (the
    network on `device`: where the evaluator runs, which decides the default pipeline groups)."""
    validate_search(cfg)
    service = LocalInference(evaluator_factory, threads=threads, device=device)
    return PuctSearch(cfg, game=game, evaluation=service.evaluation(BEST), seed=seed)


def uniform_evaluator(game: BoardGame) -> Callable[[], Evaluator]:
    """A factory of the evaluator with a uniform prior and a value of 0 (tree and rules alone)."""

    def make() -> Evaluator:
        def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n = len(planes)
            return np.zeros((n, game.n_actions), dtype=np.float32), np.zeros(n, dtype=np.float32)

        return evaluate

    return make
