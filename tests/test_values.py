"""Every value is checked before a run exists: each numeric key of the root and of every built-in
plugin declares its range beside its default, and a value outside it (or NaN, an infinity, an
integer past 64 bits) is one message naming the key, the value and the range. SB3's free
hyperparameters are held to their documented ranges, interpolations are resolved up front, and the
objective is checked against the metrics the run's evaluation will log.

The bulk is drawn here, in-process, through the same checks the command line runs
(`config.check_root`, `config.typed`, the SB3 plugin's `check_hyperparams`); tests/test_values_cli.py
runs a handful end to end."""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from framework import conf_packages, config
from framework.app import compose
from framework.errors import ConfigError
from framework.values import CHECK, INT64_MAX, Bounds, ValueCheck, check_values, declared, show

conf_packages.register_schemas()

#: Schemas whose numeric keys are declared in a file of another family, not yet ranged: they are
#: still held to finiteness and 64 bits (`test_nan_and_infinities_are_refused_in_every_float_key`).
NOT_YET_RANGED: set[tuple[str, str]] = set()
#: Where each plugin is chosen on the command line (the sb3 plugin by an algorithm's config).
CHOSEN_BY = {
    ("agent", "sb3"): ["agent=ppo"],
    ("agent", "alphazero"): ["experiment=gomoku_6x6"],
    ("search", "sequential"): ["experiment=gomoku_6x6"],
    ("search", "ray_async"): ["experiment=gomoku_6x6", "search=ray_async"],
}


@dataclasses.dataclass(frozen=True)
class Key:
    """One numeric key: the section and plugin it belongs to ('' for the root), its dotted path in
    the section, the number type it holds, and what its field declares."""

    section: str
    plugin: str
    schema: type
    path: str
    kind: type
    nullable: bool
    listed: bool
    bounds: Bounds | None

    @property
    def full(self) -> str:
        return f"{self.section}.{self.path}" if self.section else self.path

    @property
    def chosen_by(self) -> list[str]:
        return CHOSEN_BY.get((self.section, self.plugin), [f"{self.section}={self.plugin}"])

    def __str__(self) -> str:  # hypothesis prints the drawn key by this
        return self.full


def numeric_keys(section: str, plugin: str, schema: type, prefix: str = "") -> Iterator[Key]:
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nested = next((a for a in (hint, *args) if isinstance(a, type) and dataclasses.is_dataclass(a)), None)
        if nested is not None:
            yield from _nested(section, plugin, schema, nested, f"{prefix}{f.name}.")
            continue
        base = args[0] if len(args) == 1 and typing.get_origin(hint) is not list else hint
        listed = typing.get_origin(hint) is list
        if listed:
            base = typing.get_args(hint)[0]
        if hint is Any:  # a number or a schedule: numeric when its default is
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            if isinstance(default, dict):
                default = default.get("start", default.get("value"))
            if not isinstance(default, int | float) or isinstance(default, bool):
                continue
            base = type(default)
        if base in (int, float):
            bounds = declared(f)
            yield Key(
                section,
                plugin,
                schema,
                f"{prefix}{f.name}",
                base,
                type(None) in typing.get_args(hint),
                listed,
                bounds if isinstance(bounds, Bounds) else None,
            )


def _nested(section: str, plugin: str, schema: type, nested: type, prefix: str) -> Iterator[Key]:
    for key in numeric_keys(section, plugin, nested, prefix):
        yield dataclasses.replace(key, schema=schema)


SCHEMAS = sorted(config.SCHEMAS.items())
ALL_KEYS = [
    *numeric_keys("", "", config.root_schema()),
    *(key for (section, name), schema in SCHEMAS for key in numeric_keys(section, name, schema)),
]
RANGED = [k for k in ALL_KEYS if k.bounds is not None and not k.listed]
ROOT = compose([])


def test_every_numeric_key_of_the_root_and_of_every_built_in_plugin_declares_its_range() -> None:
    undeclared = [
        key.full + (f" ({key.plugin})" if key.plugin else "")
        for key in ALL_KEYS
        if key.bounds is None and (key.section, key.plugin) not in NOT_YET_RANGED
    ]
    assert not undeclared, f"numeric keys without bounds(...) beside their default: {undeclared}"
    assert len(RANGED) > 80  # the walk found the plugins' keys, nested ones included
    assert any(k.full == "search.max_wait_ms" for k in RANGED)
    assert any(k.full == "eval.episodes" for k in RANGED)


def outside(bounds: Bounds, kind: type) -> st.SearchStrategy[float]:
    """Numbers a key of `kind` with `bounds` must refuse: below, above, at an open end, NaN, the
    infinities, an integer past 64 bits."""
    options: list[st.SearchStrategy[Any]] = [st.sampled_from([math.nan, math.inf, -math.inf])]
    if kind is int:
        options.append(st.sampled_from([INT64_MAX + 1, -INT64_MAX - 2, 10**30]))
        if bounds.ge is not None or bounds.gt is not None:
            top = int(bounds.ge) - 1 if bounds.ge is not None else int(bounds.gt)  # type: ignore[arg-type]
            options.append(st.integers(max_value=top, min_value=-INT64_MAX))
        if bounds.le is not None or bounds.lt is not None:
            low = int(bounds.le) + 1 if bounds.le is not None else int(bounds.lt)  # type: ignore[arg-type]
            options.append(st.integers(min_value=low, max_value=INT64_MAX))
    else:
        if bounds.ge is not None:
            options.append(st.floats(max_value=bounds.ge, exclude_max=True, allow_infinity=False))
        if bounds.gt is not None:
            options.append(st.floats(max_value=bounds.gt, allow_infinity=False, allow_nan=False))
        if bounds.le is not None:
            options.append(st.floats(min_value=bounds.le, exclude_min=True, allow_infinity=False))
        if bounds.lt is not None:
            options.append(st.floats(min_value=bounds.lt, allow_infinity=False, allow_nan=False))
    return st.one_of(options).filter(lambda v: v not in bounds.also)


def inside(bounds: Bounds, kind: type) -> st.SearchStrategy[float]:
    """Numbers a key of `kind` with `bounds` takes."""
    low = bounds.ge if bounds.ge is not None else bounds.gt
    high = bounds.le if bounds.le is not None else bounds.lt
    if kind is int:
        low_int = None if low is None else int(low) + (1 if bounds.gt is not None else 0)
        high_int = INT64_MAX if high is None else int(high) - (1 if bounds.lt is not None else 0)
        within: st.SearchStrategy[Any] = st.integers(min_value=low_int, max_value=high_int)
    else:
        within = st.floats(
            min_value=low,
            max_value=high,
            exclude_min=bounds.gt is not None,
            exclude_max=bounds.lt is not None,
            allow_nan=False,
            allow_infinity=False,
        )
    return st.one_of(within, st.sampled_from(bounds.also)) if bounds.also else within


def check(key: Key, value: Any) -> None:
    """The check the command line runs on `key` set to `value`: the root's, or the section's."""
    if not key.section:
        cfg = copy.deepcopy(ROOT)
        OmegaConf.update(cfg, key.path, value, merge=False)
        config.check_root(cfg)
    else:
        node = OmegaConf.create({"name": key.plugin})
        OmegaConf.update(node, key.path, value, force_add=True)
        config.typed(node, key.schema, key.section, key.plugin)


def refusal(key: Key, value: Any) -> str:
    with pytest.raises(ConfigError) as refused:
        check(key, value)
    message = str(refused.value)
    assert "\n" not in message and message.strip() == message, message
    return message


PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.data())
def test_a_value_outside_a_declared_range_is_one_message_naming_the_key_the_value_and_the_range(
    data: st.DataObject,
) -> None:
    key = data.draw(st.sampled_from(RANGED), label="key")
    assert key.bounds is not None
    value = data.draw(outside(key.bounds, key.kind), label="value")
    if not key.section and key.kind is int and isinstance(value, float):
        return  # the root is typed as Hydra composes it: `seed=nan` never reaches a check (test_refusals)
    message = refusal(key, value)
    if message.startswith("Invalid value for "):  # typed by OmegaConf: an int key takes no float
        assert key.kind is int and isinstance(value, float), message
        assert message.startswith(f"Invalid value for {key.full} "), message
        return
    if " must be an integer" in message:  # a float for an int key: said so (with the int to write)
        assert key.kind is int and isinstance(value, float), message
        assert message.startswith(f"{key.full}={value!r} must be an integer"), message
        return
    assert message.startswith(f"{key.full}={show(value)} "), message
    assert key.bounds.text() in message, message


@PROPERTY
@given(st.data())
def test_a_value_inside_a_declared_range_passes(data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(RANGED), label="key")
    assert key.bounds is not None
    check(key, data.draw(inside(key.bounds, key.kind), label="value"))


@pytest.mark.parametrize("key", [k for k in ALL_KEYS if k.kind is float and not k.listed], ids=str)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=str)
def test_nan_and_infinities_are_refused_in_every_float_key(key: Key, value: float) -> None:
    assert f"{key.full}={show(value)} is not a finite number" in refusal(key, value)


@pytest.mark.parametrize("key", [k for k in ALL_KEYS if k.kind is int and not k.listed], ids=str)
def test_an_integer_past_64_bits_is_refused_in_every_integer_key(key: Key) -> None:
    assert f"{key.full}={INT64_MAX + 1} " in refusal(key, INT64_MAX + 1)


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        ("agent.hidden_sizes", [64, 0], "agent.hidden_sizes[1]=0 must be >= 1"),
        (
            "agent.exploration",
            {"kind": "linear", "start": 1.0, "end": 1.5, "steps": 10},
            "must be in [0, 1] (it reaches 1.5)",
        ),
        (
            "agent.learning_rate",
            {"kind": "linear", "start": 0.0, "end": 0.0, "steps": 10},
            "must be > 0 (a schedule: > 0 at the start, >= 0 after)",
        ),
        (
            "agent.exploration",
            {"kind": "piecewise", "endpoints": [[0, 1.0], [100, math.nan]]},
            "must be in [0, 1] (it reaches nan)",
        ),
        ("agent.gradient_steps", 0, "agent.gradient_steps=0 must be >= 1, or -1 (default 1)"),
    ],
)
def test_lists_and_schedules_are_held_to_their_keys_range(path: str, value: Any, said: str) -> None:
    cfg = compose([])
    OmegaConf.update(cfg, path, value, merge=False)
    with pytest.raises(ConfigError, match=_literal(said)):
        config.plugin_section(cfg, "agent")


def test_a_schedule_that_starts_in_range_may_decay_to_an_open_end() -> None:
    cfg = compose(["env=lunarlander"])  # its tuned DQN decays the learning rate to 0
    assert cfg.agent.learning_rate.end == 0.0
    config.plugin_section(cfg, "agent")


@pytest.mark.parametrize("good", ["127.0.0.1", "0.0.0.0", "::1", "localhost", "my-box.lan"])
def test_a_host_key_takes_addresses_and_host_names(good: str) -> None:
    config.plugin_section(compose(["env=fighter", f"env.host={good}"]), "env")


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("256.1.1.1", "env.host='256.1.1.1' is not an IP address (four numbers from 0 to 255"),
        ("1.2.3", "env.host='1.2.3' is not an IP address"),
        ("my_box", "env.host='my_box' is neither an IP address (127.0.0.1, ::1) nor a host name"),
        ("-box", "env.host='-box' is neither an IP address"),
    ],
)
def test_a_host_key_refuses_what_is_neither(bad: str, said: str) -> None:
    with pytest.raises(ConfigError, match=_literal(said)):
        config.plugin_section(compose(["env=fighter", f"env.host={bad}"]), "env")


@dataclasses.dataclass(frozen=True)
class _Even:
    def problem(self, value: Any) -> str | None:
        return None if int(value) % 2 == 0 else "is odd: give an even number"


def test_a_plugins_own_check_is_held_like_bounds_naming_the_key() -> None:
    @dataclasses.dataclass
    class Schema:
        lanes: int = dataclasses.field(default=2, metadata={CHECK: _Even()})
        lr: float = dataclasses.field(default=0.5, metadata=config.bounds(gt=0))

    assert isinstance(declared(dataclasses.fields(Schema)[0]), ValueCheck)
    check_values(Schema, {"lanes": 4, "lr": 0.1})
    with pytest.raises(ConfigError, match=r"^env\.lanes=3 is odd: give an even number$"):
        check_values(Schema, {"lanes": 3, "lr": 0.1}, "env.")
    with pytest.raises(ConfigError, match=r"^env\.lr=0 must be > 0"):
        check_values(Schema, {"lanes": 4, "lr": 0}, "env.")


def test_an_unset_environment_variable_is_refused_up_front_naming_the_key_and_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FRAMEWORK_TEST_UNSET", raising=False)
    cfg = compose(["tracking.experiment=${oc.env:FRAMEWORK_TEST_UNSET}"])
    with pytest.raises(ConfigError) as refused:
        config.check_root(cfg)
    assert str(refused.value) == (
        "tracking.experiment: the environment variable FRAMEWORK_TEST_UNSET is not set; set it, or give "
        "${oc.env:FRAMEWORK_TEST_UNSET} a default: ${oc.env:FRAMEWORK_TEST_UNSET,DEFAULT}"
    )
    monkeypatch.setenv("FRAMEWORK_TEST_UNSET", "mine")
    config.check_root(cfg)
    section = config.plugin_section(cfg, "tracking")
    assert section is not None and section.cfg.experiment == "mine"


def test_a_mandatory_value_left_unset_is_refused_naming_the_key() -> None:
    cfg = compose(["tracking.experiment=???"])
    with pytest.raises(ConfigError, match=_literal("tracking.experiment has no value (???)")):
        config.check_root(cfg)


# -- the defaults themselves ------------------------------------------------------------------------

TUNED = sorted(p.stem for p in (Path(config.__file__).parents[1] / "conf" / "tuned").glob("*.yaml"))
PRESETS = [
    [],
    *([f"agent={a}"] for a in ("a2c", "dqn", "ppo", "sac", "sb3_dqn", "td3")),
    *([f"env={e}"] for e in ("atari", "fighter", "gomoku", "gym", "lunarlander")),
    *([f"experiment={x}"] for x in ("gomoku_6x6", "gomoku_9x9", "gomoku_15x15")),
    ["experiment=gomoku_6x6", "search=ray_async"],
    ["env=atari", "buffer=memory_efficient"],
]


@pytest.mark.parametrize("overrides", PRESETS, ids=lambda o: " ".join(o) or "default")
def test_every_preset_passes_its_own_checks(overrides: list[str]) -> None:
    cfg = compose(overrides)
    config.check_root(cfg)
    for section in config.plugin_sections():
        config.plugin_section(cfg, section)


@pytest.mark.parametrize("tuned", [t for t in TUNED if t.split("_")[0] not in ("dqn", "alphazero")])
def test_every_tuned_sb3_hyperparameter_is_within_its_documented_range(tuned: str) -> None:
    from framework_plugins.sb3.algorithms import algorithm_class, check_hyperparams

    agent, _, env = tuned.rpartition("_")
    cfg = compose([f"agent={agent}", f"env={env}"])
    section = config.plugin_section(cfg, "agent")
    assert section is not None and section.cfg.hyperparams
    sb3 = section.cfg
    check_hyperparams(algorithm_class(sb3.algo), sb3.hyperparams, sb3.policy, sb3.policy_kwargs)


def _literal(text: str) -> str:
    return re.escape(text)
