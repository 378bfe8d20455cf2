"""`seeds=N` on the command line: every configuration runs over N seeds, as a sweep whose parent
folds each configuration's seeds into its statistics (IQM, intervals, profiles).

`python -m framework seeds=5` is `python -m framework -m seed=range(0,5)`; beside a sweep's own
settings (`-m agent.gamma=0.9,0.99 seeds=5`) every combination runs over those five seeds; with
`seed=S`, the seeds start at S. A sweep over seeds can also be written out: `-m seed=range(5)`.
"""

from __future__ import annotations

from collections.abc import Sequence

from framework.errors import ConfigError

KEY = "seeds"
#: The most seeds `seeds=` takes: a sweep's jobs are runs of their own.
MOST = 1000
MULTIRUN = ("-m", "--multirun")
#: The largest seed (the root config's `seed` bound).
SEED_MOST = 2**32 - 1
#: Hydra's flags that show a job's config, or help, rather than run: a sweep has nothing to add there.
SHOWING = ("--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help", "--resolve")
OPTUNA = "hydra/sweeper=optuna"


def expand(argv: Sequence[str]) -> list[str]:
    """The command line with `seeds=N` written as Hydra's sweep over `seed`; unchanged without it."""
    found = [a for a in argv if a.partition("=")[0].lstrip("+") == KEY]
    if not found:
        return list(argv)
    if len(found) > 1:
        raise ConfigError(f"{' '.join(found)}: give seeds= once")
    value = found[0].partition("=")[2]
    n = _count(value)
    start = 0
    seed_args = [a for a in argv if a.partition("=")[0].lstrip("+") == "seed"]
    if seed_args:
        given = seed_args[-1].partition("=")[2].strip()
        if given.startswith("-") and given[1:].isdigit():
            raise ConfigError(
                f"{seed_args[-1]} with seeds={value}: a seed is a whole number from 0 to {SEED_MOST}; give "
                f"the first of the {n} seeds (seed=10 seeds={n} runs seeds 10..{9 + n})"
            )
        if not given.isdigit():
            raise ConfigError(
                f"{seed_args[-1]} with seeds={value}: seeds= sweeps the seed itself; give the first "
                f"seed (seed=10 seeds={n} runs seeds 10..{9 + n}) or write the sweep out (-m seed=range(5))"
            )
        start = int(given)
    if OPTUNA in argv:
        raise ConfigError(
            f"seeds={value} with {OPTUNA}: a study's trial is one run; sweep seeds with the grid sweeper "
            f"(-m SETTING=a,b seeds={n}), or make the seed a setting of the study"
        )
    rest = [a for a in argv if a not in found and a not in seed_args]
    if any(a.partition("=")[0] in SHOWING for a in rest):  # `--cfg job`: the first seed's job
        return [f"seed={start}", *rest]  # not after `--info`, whose value it would be taken for
    if n == 1:
        return [*rest, f"seed={start}"]
    multirun = [] if any(a in MULTIRUN for a in rest) else ["-m"]
    return [*multirun, *rest, f"seed=range({start},{start + n})"]


def _count(value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if not 1 <= n <= MOST:
        raise ConfigError(
            f"seeds={value}: the number of seeds each configuration runs over, a whole number from 1 to "
            f"{MOST} (seeds=5 runs seed=0..4)"
        )
    return n
