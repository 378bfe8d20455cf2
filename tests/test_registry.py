"""The entry-point registry: discovery, errors, and listing without imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from framework import registry


def fake_distribution(root: Path, name: str, entry_points: str, module: str = "", source: str = "") -> Path:
    """A minimal installed distribution (a dist-info folder) that importlib.metadata discovers."""
    info = root / f"{name}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\nSummary: fake {name}\n"
    )
    (info / "entry_points.txt").write_text(entry_points)
    if module:
        (root / f"{module}.py").write_text(source)
    return root


def test_builtin_plugins_are_discovered() -> None:
    assert {"cartpole", "lunarlander", "atari", "gym"} <= set(registry.names("env"))
    assert "sb3" in registry.names("agent")
    assert {"mlflow", "none"} <= set(registry.names("tracker"))
    assert "framework" in registry.names("conf")


def test_unknown_name_lists_known_names_and_closest_match() -> None:
    with pytest.raises(registry.RegistryError) as err:
        registry.load("env", "cartpol")
    message = str(err.value)
    assert "'cartpol'" in message
    assert "Did you mean 'cartpole'?" in message
    assert "atari" in message and "lunarlander" in message


def test_unknown_kind_names_the_valid_kinds() -> None:
    with pytest.raises(registry.RegistryError, match="Unknown plugin kind 'envs'.*env, buffer, agent"):
        registry.names("envs")


def test_load_returns_the_registered_object() -> None:
    from framework_plugins.gym_envs.envs import CartPole

    assert registry.load("env", "cartpole") is CartPole


def test_description_is_read_without_importing(tmp_path: Path) -> None:
    source = 'import this_module_does_not_exist\n\nclass Thing:\n    """Does a thing."""\n'
    fake_distribution(
        tmp_path, "fakeplug", "[framework.envs]\nthing = fakeplug_mod:Thing\n", "fakeplug_mod", source
    )
    code = (
        "import sys; from framework import registry; "
        "print(registry.info('env', 'thing').description()); "
        "print('fakeplug_mod' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:2] == ["Does a thing.", "False"]


def test_same_name_from_two_distributions_is_an_error_naming_both(tmp_path: Path) -> None:
    fake_distribution(tmp_path, "rival-envs", "[framework.envs]\ncartpole = rival_envs:CartPole\n")
    code = "from framework import registry; registry.load('env', 'cartpole')"
    out = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True)
    assert out.returncode != 0
    assert "'cartpole' is registered by more than one distribution" in out.stderr
    assert "framework 0.1.0" in out.stderr and "rival-envs 1.2.3" in out.stderr

    listing = subprocess.run(
        [sys.executable, "-m", "framework", "plugins"], env=_env(tmp_path), capture_output=True, text=True
    )
    assert listing.returncode == 1
    assert "env 'cartpole' is registered by framework 0.1.0 and rival-envs 1.2.3" in listing.stderr


def _env(path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
