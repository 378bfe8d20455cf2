"""The search engines' config schemas: every key, its default and its description (`search.<key>`)."""

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

from framework.values import bounds

#: The names search.inference.backend takes.
BACKENDS = ("auto", "torch", "onnxruntime", "torch_half")
#: The names search.root takes.
ROOTS = ("puct", "gumbel")


@dataclass
class InferenceConfig:
    backend: str = "auto"
    """What computes the network: torch (eager fp32), onnxruntime, torch_half (fp16, channels-last,
    batch norms folded, CUDA graphs per batch size on a GPU; bf16 on a CPU), or auto: onnxruntime on
    a CPU (1.5–3.5× eager torch for these networks), and on a GPU torch_half where, measured as the
    network is built, it is faster than eager fp32 and agrees with it (the top move on 99 % of a
    batch of positions, values within 0.02), else torch."""


@dataclass
class SequentialConfig:
    num_simulations: Any = field(default=400, metadata=bounds(ge=1))
    """Simulations per move: a root is searched until its children's visits add up to this
    (visits kept from the previous move's tree count). In self-play, a schedule over the run's
    steps may set it ({kind: linear, start: 50, end: 200, fraction: 0.5}, as DQN's exploration);
    play and gomocup take the schedule's last value."""
    c_puct: float = field(default=2.0, metadata=bounds(gt=0))
    """Exploration weight of PUCT: Q + c_puct · P · sqrt(N_parent) / (1 + N_child)."""
    fpu_value: Optional[float] = field(default=0.0, metadata=bounds(ge=-1, le=1))
    """An unvisited move's value (first-play urgency), from the mover's view: a number in [-1, 1]
    (0, a draw, as in AlphaZero), or null for KataGo's: its parent's value less fpu_reduction times
    the square root of the policy mass of the moves already visited."""
    fpu_reduction: float = field(default=0.2, metadata=bounds(ge=0))
    """With fpu_value null: the reduction at a node whose every move was visited (KataGo: 0.2)."""
    dirichlet_alpha: float = field(default=0.3, metadata=bounds(gt=0))
    """Concentration of the Dirichlet noise mixed into the start node's priors (self-play only)."""
    dirichlet_epsilon: Any = field(default=0.25, metadata=bounds(ge=0, le=1))
    """Weight of that noise: P = (1 − ε) · P + ε · Dir(α); a number, or a schedule over the run's steps."""
    reuse_tree: bool = True
    """Keep the subtree of the moves played since the last search of a game (its visits count)."""
    detect_wins: bool = True
    """A leaf where the player to move can win at once is scored as won without a network call."""
    forced_blocks: bool = False
    """With detect_wins: a position whose player to move must stop the opponent's win next move has
    that block as its only move, and one with two such wins to stop is lost, both without the
    network (the search never spends simulations on moves that lose at once)."""
    forced_wins: bool = False
    """A position whose player to move has a win the opponent cannot stop, found by the game's
    solver without the network (Gomoku: victory by continuous fours, `forced_win`), is scored as
    won, and at the root that win's first move is the only move searched (the search neither
    misses such a win nor walks into one). Needs a game with a `forced_win` kernel."""
    draw_contempt: float = field(default=0.0, metadata=bounds(ge=0, le=1))
    """A player's contempt for draws (Leela Chess Zero's): the player the search is for counts a
    draw as a loss of this much, its opponent as a win of as much, so that against a weaker
    opponent it plays for the win, not the draw. A network with a win/draw/loss value head
    (agent.value_head=wdl) weighs each position's draw probability so; with any network a drawn end
    of the game counts so. In [0, 1]; for a trained agent's play (self-play searches both sides, 0)."""
    root: str = "puct"
    """How the root's simulations are spent: puct (AlphaZero's; self-play's policy target is the
    visit shares), or gumbel (Danihelka et al. 2022, as mctx's gumbel_muzero_policy: Gumbel-top-k
    moves, halved by sequential halving; the policy target is the completed-Q policy, the move
    played the halving's winner, and mctx's rule chooses below the root; no Dirichlet noise, and
    each search starts a new tree)."""
    gumbel_considered: int = field(default=16, metadata=bounds(ge=1))
    """With root=gumbel: the moves the root considers at first (m of Gumbel-top-k)."""
    gumbel_c_visit: float = field(default=50.0, metadata=bounds(ge=0))
    """With root=gumbel: σ(q) = (gumbel_c_visit + the most visits of a move) · gumbel_c_scale · q."""
    gumbel_c_scale: float = field(default=0.1, metadata=bounds(gt=0))
    """With root=gumbel: the weight of the values against the policy's logits (see gumbel_c_visit)."""
    pipeline_groups: Optional[int] = field(default=None, metadata=bounds(ge=1))
    """With the network in the run's process (search=sequential): the roots of a search split into
    this many groups, whose trees are walked while the network evaluates another group's leaves
    (null: 2 where the network runs on a GPU, 1 on a CPU, whose cores the network needs itself)."""
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    """The run's inference service (one per run: every search of the run evaluates through it)."""


@dataclass
class RayAsyncConfig(SequentialConfig):
    #: Keys that live elsewhere now (framework.config.moved): self-play workers are the agent's.
    MOVED: ClassVar[dict[str, str]] = {
        "workers": "agent.workers",
        "worker_num_cpus": "agent.worker_num_cpus",
    }

    batch_size: int = field(default=32, metadata=bounds(ge=1))
    """Leaves per inference call: a batch is sent when this many wait, or after max_wait_ms."""
    max_wait_ms: float = field(default=5.0, metadata=bounds(ge=0))
    """How long a partial batch may wait for more leaves before it is sent anyway (Ray's own
    per-call cost is ~1.5 ms: much less than that saves nothing)."""
    async_inflight_limit: Optional[int] = field(default=4, metadata=bounds(ge=1))
    """Leaves a search may have waiting for the network at once, in batches: max_pending =
    async_inflight_limit × batch_size (null: one batch per root). More keeps the actor busy; more
    also means more leaves chosen on the same stale statistics (with 32 games and batches of 32,
    4 lets each tree have about 4 leaves waiting)."""
    max_inflight_batches: int = field(default=2, metadata=bounds(ge=1))
    """Batches sent and not yet answered at once: while the actor runs one, the search selects the
    next (the pipeline's depth)."""
    virtual_loss: float = field(default=1.0, metadata=bounds(ge=0))
    """A leaf waiting for its evaluation counts, on its path, as a visit that lost this much, so
    that the next selections spread over other paths."""
    inference_actors: int = field(default=1, metadata=bounds(ge=1))
    """Ray actors that run the network (batches go to them in turn)."""
    inference_num_cpus: float = field(default=1.0, metadata=bounds(gt=0))
    """CPUs Ray reserves for each inference actor (also its torch threads on a CPU)."""
    inference_num_gpus: Optional[float] = field(default=None, metadata=bounds(ge=0))
    """GPUs per inference actor (null: 1 when the cluster has one, else 0); fractions share a GPU."""
    max_restarts: int = field(default=3, metadata=bounds(ge=0))
    """Times Ray restarts an inference actor that died, before the run fails."""
    inference_timeout_s: float = field(default=120.0, metadata=bounds(gt=0))
    """How long a batch sent to an inference actor may go unanswered before the search fails."""
