"""Run names a person can tell apart in MLflow's runs table (about 21 characters show at 1400 px).

A name says what sets a run apart: its agent and seed, then the overrides that change what it trains
(short labels and values, the budget last), then its env or preset: `sb3-ppo-s0 epochs=10 steps=50k
cartpole`. Where a name leaves a difference out (a value rounded, a name at its length limit), it ends
with `cfg:1a2b`, a hash of the run's config without its seed. A sweep's runs are the sweeps plugin's
to name, from the parts here; a name given is kept. Both trackers name their runs so
(`Tracker.name_run`), and `text_width` measures a name as the runs table draws it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from framework import composes
from framework.contracts import Tracker
from framework.contracts.tracker import NAME_TAG
from framework.provenance import flatten

#: The name a run was given (`tracking.run_name`), which a resume keeps as it is.
GIVEN_NAME_TAG = "framework.given_name"

#: Root keys that say how a run is carried out or shown, not what it trains: not in a name or hash.
NOT_CONFIG = (
    "tracking",
    "device",
    "threads",
    "resume",
    "progress",
    "log_every_s",
    "checkpoint",
    "eval",
    "objective",
    "ray",
    "hydra",
)
#: Overrides of how long a run trains: after those of what it trains, in its name.
BUDGET = ("total_steps",)
#: Groups a name's agent and env already say (`sb3-ppo-s0 cartpole`).
NAMED_GROUPS = ("env", "agent", "experiment")
#: The most characters a name has; the overrides past it are left to the config hash.
MOST_CHARS = 100
#: MLflow 3.17's name column at 1400 px (measured in Chromium), less 5 % for wider system fonts.
NAME_PX = 122 * 0.95

#: Short labels for common hyperparameters; other keys go by their last part, or its initials past 12
#: letters (`target_update_interval` → `tui`).
READABLE = {
    "learning_rate": "lr",
    "n_epochs": "epochs",
    "n_envs": "envs",
    "n_steps": "n_steps",
    "batch_size": "batch",
    "buffer_size": "buffer",
    "total_steps": "steps",
    "num_simulations": "sims",
    "gae_lambda": "lambda",
    "ent_coef": "ent",
    "exploration_fraction": "explore",
    "max_grad_norm": "max_grad",
}


def agent_label(agent: Any) -> str:
    """The agent plugin, with the algorithm it runs where it runs several: `dqn`, `sb3-ppo`."""
    name = str(agent.get("name") or "agent").lower()
    algo = str(agent.get("algo") or "").lower()
    return f"{name}-{algo}" if algo and algo != name else name


def base_name(
    cfg: DictConfig, env_name: str | None, overrides: Sequence[str], swept: Sequence[str] = ()
) -> str:
    """`sb3-ppo-s0 cartpole`: `who`, then `where`, each left out where a sweep varies it."""
    return " ".join(p for p in (who(cfg, overrides, swept), where(cfg, env_name, overrides, swept)) if p)


def who(cfg: DictConfig, overrides: Sequence[str], swept: Sequence[str] = ()) -> str:
    """`sb3-ppo-s0`: the agent plugin with its algorithm, and the seed, where a sweep does not vary them."""
    parts = []
    if not {"agent", "experiment"} & set(swept) and isinstance(cfg.get("agent"), DictConfig):
        parts.append(agent_label(cfg.agent))
    if "seed" not in swept:
        parts.append(f"s{cfg.get('seed', 0)}")
    return "-".join(parts)


def where(cfg: DictConfig, env_name: str | None, overrides: Sequence[str], swept: Sequence[str] = ()) -> str:
    """`cartpole`, `gomoku_9x9`: the preset where one was chosen, else the env; empty if a sweep varies it."""
    if {"env", "experiment"} & set(swept):
        return ""
    env = env_name or OmegaConf.select(cfg, "env.name", default="")
    return _groups(overrides).get("experiment") or str(env)


def run_name(
    cfg: DictConfig, env_name: str, overrides: Sequence[str], preset: DictConfig | None = None
) -> str:
    """A run's name (module docstring); an override that sets the value `preset` has is not named."""
    changes = [
        (k, _resolved(cfg, k, v)) for k, v in config_overrides(overrides) if not _same_in(preset, cfg, k)
    ]
    changes.sort(key=lambda change: change[0] in BUDGET)  # what is trained, then for how long
    whole = all(value is None or exact(value) for _, value in changes)
    head, place = who(cfg, overrides), where(cfg, env_name, overrides)
    shown: list[str] = []
    for part in override_parts(changes):
        if len(" ".join([head, *shown, part, place])) > MOST_CHARS - len(" cfg:0000"):
            whole = False
            break
        shown.append(part)
    name = " ".join(p for p in (head, *shown, place) if p)
    return name if whole else f"{name} cfg:{config_hash(cfg)}"


def name_run(
    tracker: Tracker, cfg: DictConfig, env_name: str, overrides: Sequence[str], resumes: str | None
) -> str:
    """A run's name (`Tracker.name_run`): a resumed run keeps its own where `tracker` has it."""
    if resumes is None:
        return run_name(cfg, env_name, overrides, preset_of(overrides))
    own, tags = None, {}
    if resumes:
        with contextlib.suppress(LookupError):
            tags = tracker.run_tags(resumes)
            own = tags.get(NAME_TAG)
    if own and tags.get(GIVEN_NAME_TAG) == own:  # the name its user gave it (tracking.run_name) stays
        return own
    if not own:  # as its first part's overrides named it (and the budget the resume gives it, last)
        return run_name(cfg, env_name, overrides)
    if not any(o.startswith("total_steps=") for o in overrides):
        return own
    # Its own, with the budget the resume gives it: `steps=8k` becomes `steps=10k`, or is added.
    (budget,) = override_parts([("total_steps", str(cfg.total_steps))])
    shown = rf"(?<!\S){re.escape(budget.split('=')[0])}=\S+"
    if re.search(shown, own):
        return re.sub(shown, budget, own)
    place = where(cfg, env_name, ())
    at = own.rfind(f" {place}") if place else -1
    return f"{own[:at]} {budget}{own[at:]}" if at > 0 else f"{own} {budget}"


def config_overrides(overrides: Sequence[str]) -> list[tuple[str, str | None]]:
    """The overrides that change what a run trains, as (key, value); a deletion (`~key`) has None."""
    found: dict[str, str | None] = {}
    for override in overrides:
        raw_key, sep, value = override.partition("=")
        key = raw_key.lstrip("+~")
        root = key.split(".", 1)[0].split("/", 1)[0]
        if root in NOT_CONFIG or key == "seed" or key in NAMED_GROUPS:
            continue
        if raw_key.startswith("~") and not sep:
            found[key] = None
        elif sep:
            found[key] = value.strip().strip("'\"")
    return sorted(found.items())


def _resolved(cfg: DictConfig, key: str, value: str | None) -> str | None:
    """An override's value as the run took it: `${oc.env:NENVS,2}` is named by what it resolved to."""
    if value is None or "${" not in value:
        return value
    found = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
    return value if found is None else str(found)


def preset_of(overrides: Sequence[str]) -> DictConfig | None:
    """The config the command line composes without the values it sets: the preset they change (None
    where it sets no value, outside a Hydra app, or where the rest alone does not compose)."""
    changed = {key for key, _ in config_overrides(overrides)}
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    if not changed or not GlobalHydra.instance().is_initialized() or HydraConfig.instance().cfg is None:
        return None
    known = composes.without_values(changed)  # from the job's own compose, where it can be
    if known is not None:
        return known
    kept = [o for o in overrides if o.partition("=")[0].lstrip("+~") not in changed]
    try:
        return GlobalHydra.instance().config_loader().load_sweep_config(HydraConfig.instance().cfg, kept)  # type: ignore[arg-type]
    except Exception:  # every override is named then
        return None


#: What a key absent from a config is read as.
_ABSENT = object()


def _same_in(preset: DictConfig | None, cfg: DictConfig, key: str) -> bool:
    """Whether `key` has the same value in `preset` as in `cfg` (a key one of them lacks does not)."""
    if preset is None:
        return False
    try:
        before, after = (_plain(OmegaConf.select(c, key, default=_ABSENT)) for c in (preset, cfg))
    except Exception:  # an interpolation one of them cannot resolve
        return False
    return before is not _ABSENT and before == after


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def config_hash(cfg: DictConfig) -> str:
    """Four hex digits of the config's hash, the seed and NOT_CONFIG's keys aside."""
    data = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(data, dict)
    kept = {k: v for k, v in flatten(data).items() if k.split(".", 1)[0] not in (*NOT_CONFIG, "seed")}
    return hashlib.sha1(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:4]


def labels(keys: Sequence[str], *, short: Sequence[str] = ()) -> dict[str, str]:
    """A label per key, unique among `keys` (`lr`, `gamma`; `ne` for a key in `short`); keys that would
    share one take longer ones: their last parts, their last two parts, the whole keys."""
    options = {key: label_options(key, key in short) for key in keys}
    level = dict.fromkeys(keys, 0)
    while True:
        chosen = {key: options[key][level[key]] for key in keys}
        taken = list(chosen.values())
        shared = [k for k in keys if taken.count(chosen[k]) > 1 and level[k] < len(options[k]) - 1]
        if not shared:
            return chosen
        for key in shared:
            level[key] += 1


def short_value(value: str) -> str:
    """A value as a name shows it: 3 significant digits in the narrower form (`3e-4`, `0.99`), `100k`,
    `2M`, a list without its spaces; anything else as given."""
    text = value.strip()
    if text.lstrip("+-").isdigit():
        return _whole(int(text))
    try:
        number = float(text)
    except ValueError:
        return text.replace(", ", ",")
    if not math.isfinite(number):
        return text
    if number.is_integer() and abs(number) < 1e15 and "e" not in text.lower():
        return _whole(int(number))
    plain = f"{number:.3g}"
    mantissa, _, exponent = f"{number:.2e}".partition("e")
    scientific = f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return scientific if "e" in plain or text_width(scientific) < text_width(plain) else plain


def override_parts(changes: Sequence[tuple[str, str | None]]) -> list[str]:
    """`epochs=10`, `~tuned`: each override by its label and its short value."""
    named = labels([key for key, _ in changes])
    return [f"~{named[k]}" if v is None else f"{named[k]}={short_value(v)}" for k, v in changes]


def exact(value: str) -> bool:
    """Whether the name's form of `value` is the value itself (its number, or its text)."""
    shown = short_value(value)
    if shown == value.strip():
        return True
    try:
        return float(_unwhole(shown)) == float(value)
    except ValueError:
        return shown == value.strip().replace(", ", ",")


def _whole(number: int) -> str:
    for suffix, size in (("M", 1_000_000), ("k", 1000)):
        if number and number % size == 0:
            return f"{number // size}{suffix}"
    return str(number)


def _unwhole(text: str) -> str:
    for suffix, size in (("M", 1_000_000), ("k", 1000)):
        if text.endswith(suffix) and text[:-1].lstrip("-").isdigit():
            return str(int(text[:-1]) * size)
    return text


def label_options(key: str, short: bool) -> list[str]:
    parts = key.split(".")
    last = parts[-1]
    words = [w for w in last.split("_") if w]
    initials = "".join(w[0] for w in words)
    readable = READABLE.get(last) or (initials if len(last) > 12 and len(words) > 1 else last)
    first = [initials if len(words) > 1 else readable] if short else []
    options = [*first, readable, last, ".".join(parts[-2:]), key]
    return list(dict.fromkeys(options))


def _groups(overrides: Sequence[str]) -> dict[str, str]:
    """The groups chosen on the command line (`experiment=gomoku_9x9`), of those a name says."""
    chosen = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and key.lstrip("+") in NAMED_GROUPS:
            chosen[key.lstrip("+")] = value.strip()
    return chosen


#: Advance widths of Arial (Liberation Sans, its metric twin), in thousandths of the font size.
_WIDTHS = {
    1000: "…",
    191: "'",
    222: "ijl",
    260: "|",
    278: " !,./:;I[\\]ft",
    333: "()-`r",
    334: "{}",
    355: '"',
    389: "*",
    469: "^",
    500: "Jckvxyzs",
    556: "#$0123456789?L_abdeghnopqu",
    584: "+<=>~",
    611: "FTZ",
    667: "&ABEKPSVXY",
    722: "CDHNRUw",
    778: "GOQ",
    833: "Mm",
    889: "%",
    944: "W",
    1015: "@",
}
_WIDTH = {char: width for width, chars in _WIDTHS.items() for char in chars}
FONT_PX = 12


def text_width(text: str) -> float:
    """Pixels `text` takes in the runs table's font (12 px Arial metrics; other letters as `n`)."""
    return sum(_WIDTH.get(char, 556) for char in text) * FONT_PX / 1000
