"""AlphaZero's config schema: every key, its default and its description (`agent.<key>`)."""

from dataclasses import dataclass, field
from typing import Any, Optional

from framework.values import bounds

RUNNERS = ("vectorize", "single")
VALUE_HEADS = ("scalar", "wdl")


@dataclass
class AlphaZeroConfig:
    blocks: int = field(default=4, metadata=bounds(ge=1))
    """Residual blocks of the network's tower."""
    channels: int = field(default=64, metadata=bounds(ge=1))
    """Convolution channels of the tower."""
    value_head: str = "scalar"
    """The network's value head: scalar (AlphaGo Zero's: tanh, MSE to the outcome) or wdl (the
    probabilities of win, draw and loss, cross-entropy to the outcome: Leela Chess Zero's), whose
    draw probability a player's search can weigh (search.draw_contempt)."""
    runner: str = "vectorize"
    """Self-play runner: vectorize (parallel_games games in one process, the leaves of all of them
    evaluated in one network call) or single (one game at a time)."""
    parallel_games: Optional[int] = field(default=None, metadata=bounds(ge=1))
    """Games the vectorize runner plays at once (the batch of roots each search gets, the network's
    batch with it); null: 32 where the network runs on a CPU, 512 on a GPU (enough leaves a call
    to keep it busy, and trees to keep the run's threads so)."""
    workers: Optional[int] = field(default=None, metadata=bounds(ge=0))
    """Self-play workers: Ray actors, each playing parallel_games games with its own trees over the
    run's inference service, while the run's process trains; 0: self-play runs in the run's own
    process, between training phases. null: 1 with a search whose inference service workers can
    join (search=ray_async), else 0."""
    worker_num_cpus: float = field(default=1.0, metadata=bounds(gt=0))
    """CPUs Ray reserves for each self-play worker."""
    worker_max_restarts: int = field(default=3, metadata=bounds(ge=0))
    """Times Ray restarts a self-play worker that died (its unfinished games lost), before the run fails."""
    worker_timeout_s: float = field(default=600.0, metadata=bounds(gt=0))
    """How long the run waits for any self-play worker to finish a move before it fails saying so."""
    temperature: Any = field(default=1.0, metadata=bounds(ge=0))
    """Self-play: moves are drawn from visit counts^(1/temperature) for the first temperature_moves
    moves of a game, then the most visited move is played. A number, or a schedule over the run's
    steps ({kind: linear, start: 1.0, end: 0.5, fraction: 0.5}, as DQN's exploration)."""
    temperature_moves: int = field(default=8, metadata=bounds(ge=0))
    """Moves of each self-play game played with `temperature`."""
    noise: bool = True
    """Self-play: the search's exploration noise at each start node (PUCT: Dirichlet noise,
    search.dirichlet_alpha and _epsilon; a Gumbel root: its Gumbel noise)."""
    full_search_fraction: float = field(default=1.0, metadata=bounds(gt=0, le=1))
    """Playout cap randomisation (KataGo): the share of self-play moves searched with
    search.num_simulations and noise, and recorded for training; the others get a fast search of
    fast_simulations, without noise, and are not recorded. 1: every move is a full one."""
    fast_simulations: int = field(default=20, metadata=bounds(ge=1))
    """With full_search_fraction < 1: the simulations of a fast search."""
    random_openings: float = field(default=0.0, metadata=bounds(ge=0, le=1))
    """The share of self-play games that start from one of the env's random openings (those its
    evaluations start from: env.eval_opening_stones for gomoku) rather than the game's start, for
    varied positions (KataGo's opening diversity); the opening's moves are not recorded. 0: none."""
    replay_size: int = field(default=100_000, metadata=bounds(ge=1))
    """Positions kept for training (each sampled under a random one of the 8 board symmetries)."""
    min_replay: int = field(default=2_000, metadata=bounds(ge=0))
    """Positions needed before the first training phase."""
    train_every: int = field(default=1_000, metadata=bounds(ge=1))
    """Self-play moves between training phases."""
    updates_per_phase: int = field(default=50, metadata=bounds(ge=1))
    """Gradient steps per training phase."""
    batch_size: int = field(default=256, metadata=bounds(ge=1))
    """Positions per gradient step."""
    learning_rate: Any = field(default=2.0e-3, metadata=bounds(gt=0))
    """Adam's learning rate: a number, or a schedule over the run's steps, set at each training
    phase ({kind: linear, start: 2.0e-3, end: 2.0e-4, fraction: 1.0}: a tenth of it by the end)."""
    l2: float = field(default=1.0e-4, metadata=bounds(ge=0))
    """L2 weight penalty (Adam's weight_decay)."""
    background_training: bool = False
    """Training phases and gates in threads of their own while self-play goes on in the run's
    process (each on a CUDA stream of its own on a GPU), self-play waiting only while two phases are
    due (the positions are trained on as often as in turn); a gate due while the last still plays
    is skipped. Runs in turn are reproducible from their seed; runs in the background are not. It
    paid where a phase cost most of a move's time (eager updates on an H200: 1.56x the 15x15
    preset's moves a second); with a GPU's updates in CUDA graphs, in turn was as fast (README)."""
    gating: bool = True
    """Self-play uses the best network so far; a trained network replaces it only if it scores at
    least gate_threshold against it in gate_games arena games."""
    gate_every: int = field(default=4, metadata=bounds(ge=1))
    """Training phases between arena matches (with gating)."""
    gate_games: int = field(default=20, metadata=bounds(ge=1))
    """Arena games per gate, colours alternating."""
    gate_threshold: float = field(default=0.55, metadata=bounds(ge=0, le=1))
    """Arena score (win = 1, draw = 1/2) a new network needs to replace the best."""
    arena_temperature_moves: int = field(default=2, metadata=bounds(ge=0))
    """Gates and evaluations start from the env's random openings (env.eval_opening_stones) and play
    the search's best move throughout; from the empty board (no openings), this many moves are
    drawn from the visit counts (temperature 1) at the start of each game, so that games differ."""
    eval_simulations: Optional[int] = field(default=None, metadata=bounds(ge=1))
    """Simulations a move in evaluations against the env's opponents (null: search.num_simulations)."""
    save_replay: bool = True
    """Keep the replay in checkpoints, so that resume= continues with it."""
