"""Sub-commands come from the `framework.commands` entry-point group: listed by --help, run by name,
refused when two distributions register one name; any other word is Hydra's."""

from __future__ import annotations

import os
import re
from pathlib import Path

from framework import registry
from tests.test_registry import fake_distribution

BUILT_IN = {"plugins", "gomocup", "play"}


def _path_with(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_the_built_in_commands_are_registered_entry_points_with_a_description() -> None:
    assert set(registry.names("command")) >= BUILT_IN
    for name in registry.names("command"):
        assert callable(registry.load("command", name)), name
        assert registry.info("command", name).description(), f"command {name} has no docstring line"


def test_help_lists_each_command_with_its_description(cli) -> None:
    r = cli("--help")
    assert r.returncode == 0, r.output
    _, *commands = r.stdout.split("== Commands ==", 1)[1].split("==", 1)[0].splitlines()
    # A row starts two spaces in; a description too long for one line goes on under itself.
    rows = {line.split()[0]: line for line in commands if re.match(r"  \S", line)}
    assert set(rows) == set(registry.names("command"))
    assert "List the installed plugins" in rows["plugins"]
    assert "Gomocup (piskvork) brain" in rows["gomocup"]
    assert "in the browser" in rows["play"]


def test_a_third_party_command_runs_with_its_arguments_and_shows_in_help(cli, tmp_path: Path) -> None:
    source = (
        "import sys\n\n"
        "def main(argv: list[str]) -> int:\n"
        '    """Say hello; costs $5."""\n'
        "    print('hello', *argv)\n"
        "    return 3\n"
    )
    site = fake_distribution(
        tmp_path / "site", "hello-cmd", "[framework.commands]\nhello = hello_cmd:main\n", "hello_cmd", source
    )
    r = cli("hello", "a", "--b=c", env=_path_with(site))
    assert (r.returncode, r.stdout) == (3, "hello a --b=c\n"), r.output
    listed = cli("--help", env=_path_with(site))
    assert "  hello    Say hello; costs $5." in listed.stdout  # `$` survives Hydra's help template


def test_a_command_registered_by_two_distributions_is_refused_naming_both(cli, tmp_path: Path) -> None:
    site = fake_distribution(tmp_path / "site", "rival-cmds", "[framework.commands]\nplay = rival:main\n")
    r = cli("play", "some-run", env=_path_with(site))
    assert r.returncode == 1
    assert "'play' is registered by more than one distribution" in r.stderr
    assert "framework 0.1.0" in r.stderr and "rival-cmds 1.2.3" in r.stderr
    assert "Traceback" not in r.output
    listed = cli("--help", env=_path_with(site))
    assert "play     (registered by framework 0.1.0 and rival-cmds 1.2.3: uninstall one)" in listed.stdout


def test_a_word_that_is_no_command_is_hydras_refusal_naming_the_commands(cli) -> None:
    r = cli("plugin")
    assert r.returncode == 1
    assert "'plugin' is neither a command nor an override" in r.stderr
    assert "Did you mean python -m framework plugins?" in r.stderr
    assert f"Commands: {', '.join(sorted(registry.names('command')))}." in r.stderr
    assert "Traceback" not in r.output
