"""A run's searches: its search plugin, the one inference service it starts for the run (on first
use, once), and every search made over that service, all closed together. It is what a run with
search=... hands its agent (`ctx.parts["search"]`: `run_searches(ctx)`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from framework.contracts import RunContext
from framework_plugins.boardgames.game import Evaluator
from framework_plugins.boardgames.search import BEST, InferenceService, SearchEngine, SearchPlugin

log = logging.getLogger("framework")


def run_searches(ctx: RunContext) -> RunSearches:
    """The run's searches (a run with search=...)."""
    searches = ctx.parts.get("search")
    if not isinstance(searches, RunSearches):
        raise RuntimeError("this run has no search config (search=...)")
    return searches


class RunSearches:
    """The search plugin of a run (or of a trained player) and what it started."""

    def __init__(
        self,
        plugin: SearchPlugin,
        game: Any,
        source: Callable[[], Evaluator],
        *,
        device: str,
        threads: int = 1,
        seed: int = 0,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.plugin, self.game, self.source, self.device = plugin, game, source, device
        self.threads = threads
        """The run's CPU threads (`threads`): the searches' as well as the network's."""
        self.seed = seed
        self.should_stop = should_stop
        self._inference: InferenceService | None = None
        self._searches: list[SearchEngine] = []
        self._own: SearchEngine | None = None

    @property
    def own(self) -> SearchEngine:
        """The run's own search (model "best", the run's seed), made on first use."""
        if self._own is None:
            self._own = self.make(seed=self.seed)
        return self._own

    @property
    def inference(self) -> InferenceService:
        """The run's inference service, started now if it was not yet."""
        if self._inference is None:
            self._inference = self.plugin.start_inference(
                self.source, device=self.device, threads=self.threads, should_stop=self.should_stop
            )
        return self._inference

    @property
    def started(self) -> bool:
        return self._inference is not None

    def make(self, model: str = BEST, *, seed: int, game: Any = None) -> SearchEngine:
        """A search over the run's service with `model`'s weights; closed with the run."""
        search = self.plugin.make(
            game=self.game if game is None else game, inference=self.inference, model=model, seed=seed
        )
        self._searches.append(search)
        return search

    def forget(self, search: SearchEngine) -> None:
        """Close a search made here before the run ends (a gate's, an evaluation's)."""
        search.close()
        if search is self._own:
            self._own = None
        if search in self._searches:
            self._searches.remove(search)

    def interrupt(self) -> None:
        """End the searches under way at once (the run is stopping: Ctrl-C)."""
        for search in list(self._searches):
            search.interrupt()

    def close(self) -> None:
        """Close every search, then the service."""
        self._own = None
        searches, self._searches = self._searches, []
        for search in searches:
            try:
                search.close()
            except Exception:
                log.exception("could not close the search %s", type(search).__name__)
        if self._inference is not None:
            inference, self._inference = self._inference, None
            try:
                inference.close()
            except Exception:
                log.exception("could not close the inference service %s", type(inference).__name__)
