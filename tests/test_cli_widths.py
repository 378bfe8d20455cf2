"""Every line the CLI prints fits 100 columns, a path or an address aside, and `--help` leads with
the commands and the config groups on a screen of 30 lines, before the full config."""

from __future__ import annotations

import itertools
import logging
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import framework_conf
from framework import registry
from framework.columns import LogFormatter, fits, wrap
from framework.config import plugin_sections
from tests.conftest import COLUMNS, run_cli, too_wide

SCREEN = 30
CONF = Path(framework_conf.__file__).parent


def config_groups() -> dict[str, list[str]]:
    """The built-in config groups and their choices, read from conf/."""
    return {
        folder.name: sorted(path.stem for path in folder.glob("*.yaml"))
        for folder in sorted(CONF.iterdir())
        if folder.is_dir() and any(folder.glob("*.yaml"))
    }


def plugin_names() -> list[str]:
    """Each installed plugin of a kind a config group selects (`sb3`, `dqn`, `mlflow`, ...); and `ppo`,
    a config that is not its plugin's name (its listing says what it sets itself)."""
    return sorted({name for kind in plugin_sections().values() for name in registry.names(kind)} | {"ppo"})


def run_narrow(*args: str, cwd: Path) -> str:
    """`python -m framework ARGS` piped, at COLUMNS columns: its stdout and stderr, checked to fit."""
    r = run_cli(*args, cwd=cwd, env={"COLUMNS": str(COLUMNS)})
    wide = too_wide(r.output)
    assert not wide, f"{args}: lines over {COLUMNS} columns:\n" + "\n".join(wide)
    return r.output


def run_on_terminal(*args: str, cwd: Path, timeout: float = 300) -> tuple[int, str]:
    """`python -m framework ARGS` on a pseudo-terminal of COLUMNS columns: its exit status and screen."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SCREEN, COLUMNS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen(
        [sys.executable, "-m", "framework", *args],
        cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env={**env, "HYDRA_FULL_ERROR": "0"},
    )  # fmt: skip
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        code = p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_help_leads_with_every_command_and_config_group_on_one_screen(tmp_path: Path) -> None:
    lines = run_narrow("--help", cwd=tmp_path).splitlines()
    config = next(i for i, line in enumerate(lines) if line.startswith("== Config =="))
    assert config < SCREEN, f"the full config starts on line {config + 1}:\n" + "\n".join(lines[:config])
    screen = lines[:SCREEN]
    for command in registry.names("command"):
        assert any(line.startswith(f"  {command} ") for line in screen), (command, screen)
    for group, choices in config_groups().items():
        (row,) = [i for i, line in enumerate(screen) if line.startswith(f"{group}: ")]
        rows = [screen[row], *itertools.takewhile(lambda line: line.startswith(" "), screen[row + 1 :])]
        listed = " ".join(" ".join(rows).split()).removeprefix(f"{group}: ")
        assert listed.split(", ") == choices, (group, listed)


def test_help_piped_into_head_ends_quietly(tmp_path: Path) -> None:
    """`python -m framework --help | head -3`: a reader that closed the pipe before the help was
    written (head, once it has its lines); the help ends with status 0, no BrokenPipeError traceback."""
    read, write = os.pipe()
    os.close(read)  # every write to the pipe fails now
    try:
        p = subprocess.run(
            [sys.executable, "-m", "framework", "--help"], cwd=tmp_path, stdout=write,
            stderr=subprocess.PIPE, timeout=120, env={**os.environ, "COLUMNS": "100"},
        )  # fmt: skip
    finally:
        os.close(write)
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode()[-2000:]


def test_plugins_fits_100_columns(tmp_path: Path) -> None:
    assert "KIND" in run_narrow("plugins", cwd=tmp_path)


@pytest.mark.parametrize("name", plugin_names())
def test_each_plugins_config_fits_100_columns(name: str, tmp_path: Path) -> None:
    output = run_narrow("plugins", "--config", name, cwd=tmp_path)
    assert "plugin '" in output.splitlines()[0]


def test_a_description_starts_by_column_44_or_goes_under_its_row(tmp_path: Path) -> None:
    lines = run_narrow("plugins", "--config", "dqn", cwd=tmp_path).splitlines()
    batch = next(line for line in lines if line.split()[:1] == ["agent.batch_size"])
    assert batch.index("Transitions per gradient step.") <= 44, batch
    # A default as long as a schedule's has its row's description on the next line, in that column.
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["agent.exploration"])
    assert lines[at].rstrip().endswith("}"), lines[at]
    assert lines[at + 1].lstrip().startswith("ε of ε-greedy acting"), lines[at + 1]
    assert len(lines[at + 1]) - len(lines[at + 1].lstrip()) == batch.index("Transitions")


@pytest.mark.parametrize(
    "args",
    [
        ("agent=dqm",),  # an unknown plugin's config
        ("agent.batchsize=3",),  # an unknown key
        ("agent.exploration=2",),  # a value out of its range, with its description
        ("plugins", "--config", "dqm"),
        ("plugins", "--kind", "agnet"),
        ("compare", "--mode", "maximum"),
    ],
)
def test_a_refusal_fits_100_columns_piped_and_on_a_terminal(args: tuple[str, ...], tmp_path: Path) -> None:
    piped = run_cli(*args, cwd=tmp_path)
    printed = piped.printed_stderr
    (said,) = [line for line in piped.stderr.splitlines() if "rror: " in line]
    assert piped.returncode != 0 and len(said) > COLUMNS, piped.stderr  # a message that needs wrapping
    assert not too_wide(printed), printed
    # Its first line is still the one to grep: it starts the message, `Error:` and what was refused.
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line and said.startswith(line))
    assert "rror: " in lines[start], printed
    code, screen = run_on_terminal(*args, cwd=tmp_path)
    assert code == piped.returncode, screen
    wide = too_wide(screen)
    assert not wide, "\n".join(wide)
    # The same words, wrapped at spaces: nothing cut, nothing lost.
    begin = screen.index(said[:40])
    assert " ".join(screen[begin:].split()) == " ".join(said.split()), screen
    assert " ".join(printed[printed.index(said[:40]) :].split()) == " ".join(said.split()), printed


def test_a_sweep_and_its_log_lines_fit_100_columns(tmp_path: Path) -> None:
    """Hydra's lines (each job's overrides) and the run's own log lines (the note on the preset's
    batch size that follows env.n_envs, once 164 columns) wrap to fit, a path left whole."""
    output = run_narrow(
        "-m", "agent=ppo", "agent.hyperparams.n_epochs=10", "env.n_envs=4", "seed=3", "total_steps=256",
        "eval.episodes=1", "tracking=none", cwd=tmp_path,
    )  # fmt: skip
    assert "[HYDRA] Launching 1 jobs locally" in output and "follows the rollout" in output, output
    said = " ".join(output.split())
    assert "batch_size=256 (the preset's) follows the rollout of n_steps x env.n_envs" in said, output


def test_a_log_record_wraps_to_100_columns_and_keeps_its_traceback() -> None:
    formatter = LogFormatter("[%(levelname)s] %(message)s")
    record = logging.LogRecord("framework", logging.INFO, __file__, 1, "word " * 40, None, None)
    lines = formatter.format(record).splitlines()
    assert len(lines) == 3 and all(len(line) <= COLUMNS for line in lines), lines
    assert lines[0].startswith("[INFO] word") and lines[1].startswith("  word"), lines
    path = "/" + "p" * 120  # a line long only by its path stays whole, to be copied
    record = logging.LogRecord("framework", logging.INFO, __file__, 1, f"run started: dir={path}", None, None)
    assert formatter.format(record) == f"[INFO] run started: dir={path}"
    try:
        raise ValueError("x " * 80)
    except ValueError:
        record = logging.LogRecord("framework", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    text = formatter.format(record)
    assert text.startswith("[ERROR] failed\nTraceback") and "ValueError: " + "x " * 79 + "x" in text


def test_the_width_check_counts_prose_and_leaves_out_paths_and_addresses() -> None:
    prose = "word " * 21  # 105 columns
    assert too_wide(prose) and not fits(prose)
    path_line = "  run dir           /" + "a" * 120
    url_line = "  view it           http://127.0.0.1:5000/#/experiments/1/runs/" + "f" * 80
    command = "  continue with     python -m framework resume=/" + "o" * 90 + " tracking=none"
    for line in (path_line, url_line, command):
        assert not too_wide(line) and fits(line), line
    metric = "eval/return_mean " * 7  # slashes that name a metric are words to count
    assert too_wide(metric) and not fits(metric)


def test_wrapping_keeps_a_command_and_an_address_whole() -> None:
    text = "Did you mean " + "x " * 38 + "python -m framework plugins? See http://127.0.0.1:5000/" + "p" * 120
    lines = wrap(text, COLUMNS, indent="  ")
    assert any("python -m framework plugins?" in line for line in lines), lines
    # The address stays whole where it stands: a line may be long by it alone.
    assert any(line.endswith(" See http://127.0.0.1:5000/" + "p" * 120) for line in lines), lines
    assert not too_wide("\n".join(lines)) and all(fits(line) for line in lines), lines
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())
    # A log line long only by its path keeps the path beside its prefix, the prose after it.
    path = "/tmp/" + "d" * 110
    lines = wrap(f"[21:06:20][WARNING] {path} holds a checkpoint of run {'f' * 32}: " + "y " * 30, 100)
    assert lines[0].startswith(f"[21:06:20][WARNING] {path} holds a checkpoint"), lines
    assert len(lines) == 2 and not too_wide("\n".join(lines)), lines


def test_a_launchers_job_line_leaves_a_sweepers_environment_to_the_log_file() -> None:
    """An Optuna trial's job line carries its trial in `hydra.job.env_set` (a JSON object with the
    study's storage, 240 columns): the console shows the job's own values, the log file all."""
    from framework.columns import LogFormatter

    trial = """'{"sweeper":"optuna","number":3,"study":"it\\'s","storage":"sqlite:////tmp/optuna.db"}'"""
    message = (
        f"\t#3 : agent.hyperparams.learning_rate=0.0025 ++hydra.job.env_set.FRAMEWORK_TRIAL={trial} seed=0"
    )
    record = logging.LogRecord("hydra", logging.INFO, __file__, 1, message, None, None)
    assert (
        LogFormatter("%(message)s").format(record) == "\t#3 : agent.hyperparams.learning_rate=0.0025 seed=0"
    )
