"""What Hydra's and OmegaConf's refusals say to a user: one line naming the bad value and the valid
choices (the config groups' options, a section's keys, the plugins installed)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass

from hydra.errors import CompactHydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from framework import registry
from framework.config import plugin_sections
from framework.errors import MOVED, SYNONYMS, closest, did_you_mean, moved_message, wrong_type

#: The sweep functions of Hydra's override grammar, each as it is written.
GRAMMAR = {
    "choice": "choice(a,b,c) (or a,b,c)",
    "range": "range(START,STOP[,STEP])",
    "interval": "interval(LOW,HIGH)",
    "tag": "tag(log,interval(LOW,HIGH)) for a log scale",
}
#: Other libraries' names of those (Optuna's, Ray Tune's, scipy's), by their name in lower case.
GRAMMAR_NAMES = {
    "uniform": "interval(LOW,HIGH)",
    "loguniform": "tag(log,interval(LOW,HIGH))",
    "reciprocal": "tag(log,interval(LOW,HIGH))",
    "randint": "range(START,STOP)",
    "categorical": "choice(a,b,c)",
    "choices": "choice(a,b,c)",
    "grid": "choice(a,b,c)",
    "gridsearch": "choice(a,b,c)",
}

#: Hydra's launchers the `launchers` extra installs, by their option, and the package of each.
LAUNCHERS = {"joblib": "hydra-joblib-launcher", "ray": "hydra-ray-launcher"}


def hydra_message(error: BaseException, commands: Sequence[str] = ()) -> str | None:
    """What to print for Hydra's own refusals (composition, overrides); None for anything else.
    `commands`: the command line's sub-commands, offered where a word is neither one nor an override."""
    if isinstance(error, ValueError) and str(error).startswith("Config group override must be"):
        given = [a for a in sys.argv[1:] if re.fullmatch(r"\+*[\w/]+=null", a)] or ["GROUP=null"]
        return (
            f"{' '.join(given)}: a config group takes one of its options (python -m framework --help "
            "lists the groups); ~GROUP leaves out an optional one (~tuned)"
        )
    if isinstance(error, ValueError) and str(error).startswith("No completion plugin for"):
        shells = ", ".join(line.strip() for line in str(error).splitlines()[1:] if line.strip())
        return f"{str(error).split(' found')[0]}: -sc install=SHELL or query=SHELL, a SHELL of {shells}"
    if isinstance(error, ValueError) and str(error).startswith("Only one of --run, --multirun, --cfg"):
        return (
            "-m (--multirun) with --cfg, --info or --shell-completion: those show one job; leave -m out "
            "(and give each swept key one value) to see that job's"
        )
    if isinstance(error, ConfigKeyError | ConfigAttributeError) and error.full_key:
        key = str(error.full_key)
        if any(re.fullmatch(rf"~{re.escape(key)}(=.*)?", a) for a in sys.argv[1:]):  # a key every run reads
            return f"~{key}: a run needs {key}, which cannot be left out (give it a value instead)"
    if not isinstance(error, CompactHydraException):
        return None
    cause = error.__cause__
    if isinstance(error, MissingConfigException) and error.options and error.missing_cfg_file:
        group, _, option = str(error.missing_cfg_file).rpartition("/")
        hint = did_you_mean(option, error.options, prefix=f"{group}=") + _installed_without_config(
            group, option
        )
        if group == "hydra/launcher" and option in LAUNCHERS:
            hint += f' It comes with {LAUNCHERS[option]}: pip install "framework[launchers]".'
        return f"{group}={option} is not a config of group {group}.{hint} Options: {', '.join(error.options)}"
    if (
        isinstance(cause, ConfigKeyError | ConfigAttributeError)
        and cause.full_key
        and "not in" in (cause.msg or "")
    ):
        parent = cause.parent_node
        keys = [str(k) for k in parent] if isinstance(parent, DictConfig) else []
        place = MOVED.get(str(cause.full_key))
        if place is not None:
            return moved_message(str(cause.full_key), place)
        full_key = str(cause.full_key)
        section, _, leaf = full_key.rpartition(".")
        nodes = {k: parent.get(k) for k in keys} if isinstance(parent, DictConfig) and section else {}
        inside = {  # its section's free mappings (agent.hyperparams), where the key may belong
            f"{section}.{k}": [str(key) for key in node] for k, node in nodes.items()
            if isinstance(node, DictConfig) and _takes_any_key(node, f"{section}.{k}.{leaf}")
        }  # fmt: skip
        if not section and isinstance(parent, DictConfig):  # a section's key given at the root (`n_envs=4`)
            inside = {k: [str(key) for key in node] for k, node in _sections(parent, keys)}
        return _unknown_key(full_key, keys, _takes_any_key(parent, full_key), inside)
    if isinstance(cause, OmegaConfBaseException):
        reason = str(cause.msg or cause).strip().splitlines()[0]
        if cause.full_key:
            return wrong_type(str(cause.full_key), reason) or f"Invalid value for {cause.full_key}: {reason}"
        return f"{_first_line(error)}: {reason}"
    unknown = re.search(r"Unknown function '(\w+)'", str(error))
    if isinstance(error, OverrideParseException) and unknown:
        name = unknown[1]
        like = GRAMMAR_NAMES.get(name.lower().replace("_", ""))
        hint = f" For {name}, write {like}." if like else did_you_mean(name, GRAMMAR)
        return (
            f"{error.override}: {name}() is not a function of Hydra's override grammar.{hint} A sweep's "
            f"values: {', '.join(GRAMMAR.values())}"
        )
    if isinstance(error, OverrideParseException) and "=" not in error.override:
        hint = did_you_mean(error.override, commands, prefix="python -m framework ")
        return (
            f"{error.override!r} is neither a command nor an override (key=value, group=option).{hint} "
            f"Commands: {', '.join(commands) or '(none installed)'}. "
            "(python -m framework --help lists the commands and the config groups.)"
        )
    return " ".join(str(error).split())


def _installed_without_config(group: str, option: str) -> str:
    """Where a plugin of the group's kind has the name chosen but no config file names it: that."""

    kind = plugin_sections().get(group)
    if kind is None or option not in registry.names(kind):
        return ""
    where = registry.info(kind, option)
    return (
        f" The {kind} plugin {option!r} is installed ({where.value}, from {where.distribution}), but no "
        f"config file {group}/{option}.yaml selects it: its package's `framework.conf` entry point names "
        "the folder that holds one."
    )


def _sections(root: DictConfig, keys: Sequence[str]) -> list[tuple[str, DictConfig]]:
    """The root's sections but Hydra's, then their mappings (`agent.hyperparams`), each read without
    resolving anything (a value `???` raises)."""
    found = [(k, node) for k in keys if k != "hydra" and isinstance(node := root._get_node(k), DictConfig)]
    inner = [(f"{k}.{sub}", node._get_node(sub)) for k, node in found for sub in map(str, node)]
    return found + [(k, node) for k, node in inner if isinstance(node, DictConfig)]


def _in_a_section(leaf: str, sections: Mapping[str, list[str]]) -> str:
    """A root key that is a section's by its name or another name (`n_envs`: env.n_envs, `lr`:
    agent.learning_rate), said as that section's; '' where none has it."""
    for name in (leaf, *SYNONYMS.get(leaf.lower(), ())):
        for section, held in sections.items():
            if name in held:
                return f" Did you mean {section}.{name}?"
    return ""


def _inside_hint(leaf: str, inside: Mapping[str, list[str]]) -> str:
    """The first free mapping's key like `leaf` (`agent.lr`: agent.hyperparams.learning_rate), else `leaf`
    added to it, said with the `+` that adds a key (without it the key is refused again)."""
    if not inside:
        return ""
    mapping, held = next(iter(inside.items()))
    if found := closest(leaf, held):
        return f" Did you mean {mapping}.{found[0]}?"
    return f" Did you mean +{mapping}.{leaf}=VALUE? The + adds a key to {mapping}."


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _takes_any_key(parent: object, full_key: str) -> bool:
    """Whether `+full_key=VALUE` would be taken: its section holds any key (`agent.hyperparams`, a dict
    in its plugin's schema), not the root's or a plugin schema's own fields."""
    section, *path = full_key.split(".")[:-1] or [""]
    if not isinstance(parent, DictConfig) or OmegaConf.get_type(parent) not in (dict, None) or not section:
        return False
    kind = plugin_sections().get(section)
    name = OmegaConf.select(parent._get_root(), f"{section}.name", default=None)
    if kind is None or name is None:
        return kind is None
    try:
        schema: object = registry.load(kind, str(name)).Config
    except Exception:
        return False
    for part in path:
        field = next((f for f in fields(schema) if f.name == part), None) if is_dataclass(schema) else None
        if field is None:
            return False
        schema = field.type if not isinstance(field.type, str) else field.type.split("[")[0]
        if schema in (dict, "dict", "Dict", "Any") or getattr(schema, "__origin__", None) is dict:
            return True
    return False


def _unknown_key(
    full_key: str, keys: list[str], open_section: bool, inside: Mapping[str, list[str]] | None = None
) -> str:
    """An override of a key the composed config does not have, with the keys it does have; `inside`:
    the mappings of its section that take any key, or for a root key the sections, by the keys they hold."""
    section, _, leaf = full_key.rpartition(".")
    where = f"{section}." if section else ""
    if section:  # a close key of its own, else one of the mappings that take any key
        hint = did_you_mean(leaf, keys, prefix=where) or _inside_hint(leaf, inside or {})
    else:  # a section's key by its name first (`n_envs`: env.n_envs, not env)
        hint = _in_a_section(leaf, inside or {}) or did_you_mean(leaf, keys)
    if full_key == "hydra.sweeper.direction":  # Hydra's Optuna and Nevergrad sweepers' key
        hint = " The direction a sweep optimises is the objective's: objective.mode=max or min."
    listing = f" Keys of {section or 'the config'}: {', '.join(keys)}." if keys else ""
    adding = "" if hint or not open_section else f" `+{full_key}=VALUE` adds a key the config does not have."
    return (
        f"Unknown config key {full_key}.{hint}{listing}{adding} "
        f"(`python -m framework --cfg job` shows the composed config.)"
    )
