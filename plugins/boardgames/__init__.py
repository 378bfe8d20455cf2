"""Board games and the tree searches over them: the contracts a game, a search plugin and an agent
that plays by search keep, the `search` kind they add to the core's (`kind.SEARCH`), and a run's
searches (`searches.RunSearches`). Gomoku, mcts and AlphaZero build on it; the core knows none of it."""

from framework_plugins.boardgames.game import (
    BoardGame,
    BoardState,
    Evaluator,
    GameEnvPlugin,
    GameOpponent,
    PortableEvaluator,
    SolvingGame,
)
from framework_plugins.boardgames.search import (
    BEST,
    DistributedSearch,
    DrawWeighingSearch,
    InferenceService,
    Measured,
    SearchAgent,
    SearchEngine,
    SearchPlugin,
    SearchRequest,
    SearchResult,
    SelfPlaySource,
    SharedInference,
)

__all__ = [
    "BEST",
    "BoardGame",
    "BoardState",
    "DistributedSearch",
    "DrawWeighingSearch",
    "Evaluator",
    "GameEnvPlugin",
    "GameOpponent",
    "InferenceService",
    "Measured",
    "PortableEvaluator",
    "SearchAgent",
    "SearchEngine",
    "SearchPlugin",
    "SearchRequest",
    "SearchResult",
    "SelfPlaySource",
    "SharedInference",
    "SolvingGame",
]
