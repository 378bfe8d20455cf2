"""The buffer plugins as the framework sees them: registry names, config groups and their schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from framework import config, registry
from framework.app import compose
from framework_plugins.buffers.memory_efficient import MemoryEfficientReplayBuffer
from framework_plugins.buffers.replay import ReplayBuffer
from tests.conftest import run_cli


def test_the_registry_loads_both_buffers_by_name() -> None:
    assert {"replay", "memory_efficient"} <= set(registry.names("buffer"))
    assert registry.load("buffer", "replay") is ReplayBuffer
    assert registry.load("buffer", "memory_efficient") is MemoryEfficientReplayBuffer
    assert "frame" in registry.info("buffer", "memory_efficient").description()


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ("replay", {"name": "replay", "capacity": 1_000_000}),
        ("memory_efficient", {"name": "memory_efficient", "capacity": 1_000_000, "frame_history_len": 4}),
    ],
)
@pytest.mark.slow
def test_cfg_job_composes_each_buffer_group(group: str, expected: dict, tmp_path: Path) -> None:
    # agent=ppo: no tuned preset sizes the buffer, so the group's own defaults show.
    r = run_cli("--cfg", "job", "agent=ppo", f"buffer={group}", cwd=tmp_path)
    assert r.returncode == 0, r.output
    assert yaml.safe_load(r.stdout)["buffer"] == expected


@pytest.mark.parametrize("group", ["replay", "memory_efficient"])
def test_each_group_lists_every_schema_field_with_its_default(group: str) -> None:
    section = config.plugin_section(compose(["agent=ppo", f"buffer={group}"]), "buffer")
    assert section is not None and section.name == group
    assert section.cfg == section.plugin.Config()  # the composed section holds every schema default
    built = section.plugin(section.cfg)
    assert built.capacity == 1_000_000 and len(built) == 0


def test_a_misspelled_buffer_key_fails_before_running_naming_the_valid_keys() -> None:
    cfg = compose(["buffer=memory_efficient", "+buffer.frame_history=2"])
    with pytest.raises(
        config.ConfigError, match=r"buffer\.frame_history .*Did you mean buffer\.frame_history_len"
    ):
        config.plugin_section(cfg, "buffer")


def test_command_line_overrides_reach_the_built_buffer() -> None:
    cfg = compose(["buffer=memory_efficient", "buffer.capacity=64", "buffer.frame_history_len=2"])
    section = config.plugin_section(cfg, "buffer")
    assert section is not None
    buffer = section.plugin(section.cfg)
    assert (buffer.capacity, buffer.frame_history_len) == (64, 2)
