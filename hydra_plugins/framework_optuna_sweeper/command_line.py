"""`hydra.sweeper.params` given on the command line, `hydra.sweeper.params={KEY: SPACE, ...}` or
`hydra.sweeper.params.KEY=SPACE`: each KEY=SPACE its own override, as the search space is written
there (Hydra cannot merge a mapping given so into the sweeper's section). A `framework.expansions`
entry: it runs before Hydra parses the line, and imports nothing until it finds the key."""

from __future__ import annotations

from collections.abc import Sequence

from framework.errors import ConfigError

KEY = "hydra.sweeper.params"


def expand(argv: Sequence[str]) -> list[str]:
    """The command line with the search space of `hydra.sweeper.params` as overrides of its keys."""
    out: list[str] = []
    for arg in argv:
        key, equals, value = arg.partition("=")
        key = key.lstrip("+~")
        if not equals or not (key == KEY or key.startswith(f"{KEY}.")):
            out.append(arg)
        elif key != KEY:
            out.append(f"{key[len(KEY) + 1 :]}={value}")
        else:
            out += [f"{name}={space}" for name, space in _mapping(arg, value).items()]
    return out


def _mapping(arg: str, value: str) -> dict[str, str]:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    example = "hydra.sweeper.params={agent.gamma:'interval(0.9,0.999)',agent.batch_size:'choice(32,64)'}"
    try:
        parsed = OverridesParser.create().parse_override(f"{KEY}={value}").value()
    except HydraException as e:
        raise ConfigError(f"{arg}: not a mapping Hydra can read ({e}); write it as {example}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"{arg}: a mapping of each swept key to its search space, as {example}")
    return {str(name): str(space) for name, space in parsed.items()}
