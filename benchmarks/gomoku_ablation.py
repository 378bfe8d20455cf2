"""The search's learning options against today's search, at equal wall time, scored against a ladder.

Each variant trains a preset by its own command (`python -m framework experiment=NAME ...` with the
variant's overrides) for `--budget-min` minutes of its own CPU time (`--clock cpu`: equal compute
whatever else the machine runs; on a quiet machine, with each run on one thread, equal wall time),
once per seed; `--parallel` trainings run at once. Each run's last checkpoint
then plays `--games` games at `--sims` simulations a move (with its own search settings) against
each opponent of the ladder, from random openings (`gomoku_learning.match`). The table gives each
run's steps, self-play games and scores, then each variant's mean score per opponent over its seeds.

    python benchmarks/gomoku_ablation.py                               # every variant, seeds 0 and 1
    python benchmarks/gomoku_ablation.py --variants puct,gumbel --budget-min 10
    python benchmarks/gomoku_ablation.py --variants gumbel,gumbel+blocks   # options combined
    python benchmarks/gomoku_ablation.py --out DIR --matches-only      # score runs trained before
    python benchmarks/gomoku_ablation.py --out DIR --reuse             # train only the runs DIR lacks

A run's match results are kept in its directory (`ablation_match.json`, keyed by the match's
settings), so a table over runs scored before costs no new games.

The variants (VARIANTS) change BASE, the same search for all (AlphaZero's PUCT at 100 simulations):
`puct`, BASE itself; `fpu`, KataGo's first-play urgency
(search.fpu_value=null); `pcr`, playout cap randomisation (a quarter of the moves get a search twice
as long as today's and are recorded, the rest a fast one); `gumbel`, a Gumbel root with a third of
today's simulations, which still improves the policy (Danihelka et al. 2022); `blocks`, forced blocks
(search.forced_blocks=true: a four is blocked, and two are a loss, without the network).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gomoku_learning import Training, finish_all, interval, match, progress_of, start

from framework_plugins.alphazero.matches import MatchResult

#: The search every variant starts from (AlphaZero's PUCT, 100 simulations: the 9x9 preset before the
#: ablation), and the evaluations every run makes whatever its preset says (their cost counts in the
#: budget, so it is the same for all).
BASE = [
    "search.root=puct",
    "search.num_simulations=100",
    "search.fpu_value=0.0",
    "search.forced_blocks=false",
    "agent.full_search_fraction=1.0",
    "env.eval_opponents=[random,heuristic,mcts1000]",
    "eval.every_steps=50000",
    "agent.eval_simulations=null",
    "objective.metric=eval/mcts1000/score",
    "total_steps=250000",
]
#: name → overrides of BASE.
VARIANTS: dict[str, list[str]] = {
    "puct": [],
    "fpu": ["search.fpu_value=null"],
    "pcr": ["agent.full_search_fraction=0.25", "agent.fast_simulations=25", "search.num_simulations=200"],
    "gumbel": ["search.root=gumbel", "search.num_simulations=32"],
    "blocks": ["search.forced_blocks=true"],
}
LADDER = ["mcts1000", "heuristic", "alphabeta1", "alphabeta2"]


def overrides_of(variant: str) -> list[str]:
    """A variant's overrides of the preset's command (BASE, then the variant's); `a+b` combines two
    (b's win where both set a key)."""
    return [*BASE, *(o for part in variant.split("+") for o in VARIANTS[part])]


MATCH_FILE = "ablation_match.json"


def _match(args: tuple[Path, list[str], int, int, int]) -> dict[str, MatchResult]:
    """The run's scores against each opponent, from its directory's record where that has them."""
    run_dir, opponents, games, sims, seed = args
    record_path = run_dir / MATCH_FILE
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    key = lambda o: f"{o}/games={games}/sims={sims}/seed={seed}"  # noqa: E731
    missing = [o for o in opponents if key(o) not in record]
    if missing:
        import torch

        torch.set_num_threads(1)
        for o, (result, _) in match(run_dir, missing, games, sims, seed).items():
            record[key(o)] = [result.wins, result.draws, result.losses]
        record_path.write_text(json.dumps(record, indent=1))
    return {o: MatchResult(*record[key(o)]) for o in opponents}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="gomoku_9x9")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--budget-min", type=float, default=20.0, help="training minutes of each run")
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="cpu",
        help="what the budget counts: each run's CPU time (default: equal compute, whatever else the "
        "machine runs; on a quiet machine the same as wall time, each run on one thread), or wall time",
    )
    parser.add_argument("--parallel", type=int, default=2, help="trainings (and matches) at once")
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--opponents", default=",".join(LADDER))
    parser.add_argument("--out", type=Path, help="where runs go (default: a new temporary directory)")
    parser.add_argument("--matches-only", action="store_true", help="score the runs already in --out")
    parser.add_argument(
        "--reuse", action="store_true", help="train only the runs --out lacks (one with a checkpoint is kept)"
    )
    parser.add_argument("overrides", nargs="*", help="overrides for every variant's command")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [part for v in variants for part in v.split("+") if part not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    opponents = args.opponents.split(",")
    out = args.out or Path(tempfile.mkdtemp(prefix="gomoku-ablation-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    runs = [(v, s) for s in seeds for v in variants]

    trained: dict[tuple[str, int], Training] = {}
    to_train = runs
    if args.matches_only or args.reuse:
        for v, s in runs:
            run_dir = out / f"{v}-s{s}"
            if args.matches_only or (run_dir / "checkpoints").is_dir():
                steps, games = progress_of(run_dir)
                trained[v, s] = Training(run_dir, math.nan, "given", steps, games)
        to_train = [r for r in runs if r not in trained]
    if to_train:
        for i in range(0, len(to_train), args.parallel):
            batch = to_train[i : i + args.parallel]
            started = [
                start(
                    args.preset,
                    args.budget_min,
                    out,
                    [*overrides_of(v), f"seed={s}", "threads=1", *args.overrides],
                    name=f"{v}-s{s}",
                    cpu_clock=args.clock == "cpu",
                )
                for v, s in batch
            ]
            for (v, s), done in zip(batch, finish_all(started), strict=True):
                trained[v, s] = done
                print(f"{v}-s{s}: {done.steps} steps, {done.games} games", flush=True)

    jobs = [(trained[r].run_dir, opponents, args.games, args.sims, 1000 + r[1]) for r in runs]
    with ProcessPoolExecutor(max_workers=args.parallel) as pool:
        scores = dict(zip(runs, pool.map(_match, jobs), strict=True))

    header = ["variant", "seed", "steps", "games", *opponents]
    rows = []
    for v, s in runs:
        t = trained[v, s]
        rows.append(
            [v, str(s), str(t.steps), str(t.games), *(f"{scores[v, s][o].score:.2f}" for o in opponents)]
        )
    means = []
    for v in variants:
        row = [v, "mean", "", ""]
        for o in opponents:
            results = [scores[v, s][o] for s in seeds]
            wins = sum(r.wins + 0.5 * r.draws for r in results)
            n = sum(r.games for r in results)
            low, high = interval(wins / n, n)
            row.append(f"{wins / n:.2f} [{low:.2f}, {high:.2f}]")
        means.append(row)
    print(
        f"\n{args.preset}: {args.budget_min:g} min of {args.clock} time a run, {args.parallel} at once; "
        f"matches of {args.games} games at {args.sims} simulations, from random 2-stone openings\n"
    )
    table = [header, *rows, *means]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows, ["-" * w for w in widths], *means]:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
