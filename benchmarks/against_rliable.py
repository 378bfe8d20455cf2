"""Our seed statistics (framework_plugins.trackers.seed_stats) beside rliable's, on fixed data.

    pip install rliable "pandas<3"      # rliable needs arch < 8, which does not import beside pandas 3
    python benchmarks/against_rliable.py                 # a table: ours, rliable's, the difference
    python benchmarks/against_rliable.py --write tests/data/rliable_reference.json

`--write` stores the data and rliable's results for tests/test_seed_stats.py, which checks ours
against them without rliable installed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

REPS = 50_000


def fixed_data() -> dict[str, np.ndarray]:
    """Scores of three kinds: seven runs of one task, five of another, six runs of three tasks."""
    rng = np.random.default_rng(7)
    return {
        "a": np.round(rng.normal(100, 30, size=(7, 1)), 1),
        "b": np.round(rng.normal(120, 40, size=(5, 1)), 1),
        "m": np.round(rng.normal(0, 1, size=(6, 3)), 2),
    }


def taus() -> np.ndarray:
    return np.linspace(40, 200, 9)


def rliable_results(data: dict[str, np.ndarray]) -> dict[str, Any]:
    from rliable import library as rly
    from rliable import metrics

    found: dict[str, Any] = {}
    for name, scores in data.items():
        point, ci = rly.get_interval_estimates(
            {name: scores},
            lambda x: np.array(
                [metrics.aggregate_iqm(x), metrics.aggregate_mean(x), metrics.aggregate_median(x)]
            ),
            reps=REPS,
            random_state=np.random.RandomState(1),
        )
        found[name] = {"iqm_mean_median": point[name].tolist(), "interval": ci[name].tolist()}
    _, ci = rly.get_interval_estimates(
        {"ab": [data["a"], data["b"]]}, metrics.probability_of_improvement, reps=REPS
    )
    found["poi_ab"] = {
        "value": float(metrics.probability_of_improvement(data["a"], data["b"])),
        "interval": np.ravel(ci["ab"]).tolist(),
    }
    found["poi_m"] = float(metrics.probability_of_improvement(data["m"], data["m"][::-1] * 0.9))
    profiles, profile_ci = rly.create_performance_profile({"a": data["a"]}, taus(), reps=REPS)
    found["profile_a"] = {"fraction": profiles["a"].tolist(), "interval": profile_ci["a"].tolist()}
    return found


def ours(data: dict[str, np.ndarray]) -> dict[str, Any]:
    from framework_plugins.trackers import seed_stats as ss

    found: dict[str, Any] = {}
    for name, scores in data.items():
        low, high = ss.interval(
            scores, lambda s: np.stack([ss.iqm(s), ss.mean(s), ss.median(s)], axis=-1), reps=REPS
        )
        point = [float(ss.iqm(scores)), float(ss.mean(scores)), float(ss.median(scores))]
        found[name] = {"iqm_mean_median": point, "interval": [low.tolist(), high.tolist()]}
    poi = ss.improvement(data["a"], data["b"], reps=REPS)
    found["poi_ab"] = {"value": poi.value, "interval": [poi.low, poi.high]}
    found["poi_m"] = float(ss.probability_of_improvement(data["m"], data["m"][::-1] * 0.9))
    profile = ss.profile(data["a"], taus(), reps=REPS)
    found["profile_a"] = {
        "fraction": profile.fraction.tolist(),
        "interval": [profile.low.tolist(), profile.high.tolist()],
    }
    return found


def _rows(prefix: str, a: Any, b: Any) -> list[tuple[str, float, float]]:
    if isinstance(a, dict):
        return [row for key in a for row in _rows(f"{prefix}.{key}" if prefix else key, a[key], b[key])]
    if isinstance(a, list):
        return [
            row for i, (x, y) in enumerate(zip(a, b, strict=True)) for row in _rows(f"{prefix}[{i}]", x, y)
        ]
    return [(prefix, float(a), float(b))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", type=Path, help="store the data and rliable's results here (JSON)")
    args = parser.parse_args()
    data = fixed_data()
    theirs = rliable_results(data)
    if args.write:
        args.write.write_text(
            json.dumps(
                {
                    "reps": REPS,
                    "taus": taus().tolist(),
                    "data": {k: v.tolist() for k, v in data.items()},
                    "rliable": theirs,
                },
                indent=1,
            )
        )
        print(f"wrote {args.write}")
    mine = ours(data)
    print(f"{'statistic':<34} {'ours':>12} {'rliable':>12} {'difference':>11}")
    for name, x, y in _rows("", mine, theirs):
        print(f"{name:<34} {x:>12.6g} {y:>12.6g} {x - y:>11.3g}")


if __name__ == "__main__":
    main()
