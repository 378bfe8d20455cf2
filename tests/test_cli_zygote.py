"""The tests' zygote (tests/cli_zygote.py): which command lines it may run, by their environment, and
how it runs several at once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.cli_zygote import KMP_RUNTIME, forkable
from tests.conftest import run_cli, start_cli
from tests.zygote_client import ZYGOTE, ForkedCli, shell_env

ZYGOTE_ENV = {"PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"}


@pytest.mark.parametrize(
    ("extra", "imported", "expected"),
    [
        ({}, [], True),
        # Ray reads its variables as it is imported: in the child, when the zygote has not.
        ({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_DEDUP_LOGS": "1"}, [], True),
        ({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}, ["ray"], False),
        # torch.compile in the test process left its cache's folder set; the zygote has not compiled.
        ({"TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_root"}, [], True),
        ({"TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_root"}, ["torch._inductor"], False),
        # threadpoolctl and scikit-learn set Intel OpenMP's variables: read by no runtime loaded here.
        ({"KMP_DUPLICATE_LIB_OK": "True", "KMP_INIT_AT_FORK": "FALSE"}, [], True),
        ({"KMP_INIT_AT_FORK": "FALSE"}, [KMP_RUNTIME], False),
        # A run left the hashes' seed set in the test process: nothing a run computes reads it.
        ({"PYTHONHASHSEED": "3"}, [], True),
        # ray.init set breakpoint()'s hook in the test process: read where breakpoint() is called.
        ({"PYTHONBREAKPOINT": "ray.util.rpdb.set_trace"}, [], True),
        # What `python -m framework` sets itself before it imports torch, set already.
        ({"GOMP_SPINCOUNT": "10000"}, [], True),
        ({"GOMP_SPINCOUNT": "0"}, [], False),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, [], False),
        ({"OMP_NUM_THREADS": "1"}, [], False),
        ({"PYTHONDONTWRITEBYTECODE": "1"}, [], False),
        # A test's third-party plugin: its folder goes on the child's sys.path as the interpreter's.
        ({"PYTHONPATH": "/tmp/plugin"}, [], True),
        ({"HYDRA_FULL_ERROR": "1"}, [], False),
    ],
)
def test_a_command_line_is_forked_only_where_its_load_time_environment_is_the_zygotes(
    extra: dict[str, str], imported: list[str], expected: bool
) -> None:
    assert forkable({**ZYGOTE_ENV, "HOME": "/elsewhere", **extra}, ZYGOTE_ENV, imported) is expected


def test_command_lines_started_together_are_each_forked_and_answer_as_popen_does(tmp_path: Path) -> None:
    """Two command lines at once, one read as it goes (`start_cli`) and one whole (`run_cli`): each
    a child of the zygote, its output its own, its exit status Popen's (-9 for one killed)."""
    long_run = start_cli("total_steps=1000000", "tracking=none", "progress=log", cwd=tmp_path)
    assert isinstance(long_run, ForkedCli), "not forked: FRAMEWORK_TESTS_ZYGOTE_LOG=PATH says why"
    assert long_run.stdout is not None
    for line in long_run.stdout:
        if "run started" in line:
            break
    listed = run_cli("plugins", "--kind", "tracker", cwd=tmp_path)
    assert listed.returncode == 0 and "mlflow" in listed.stdout and "run started" not in listed.stdout
    with open(f"/proc/{long_run.pid}/stat") as f:
        parent = int(f.read().rsplit(")", 1)[1].split()[1])
    assert ZYGOTE.process is not None and parent == ZYGOTE.process.pid
    assert long_run.poll() is None
    long_run.kill()
    out, err = long_run.communicate(timeout=60)
    assert long_run.returncode == -signal.SIGKILL and err is None and "run started" not in out


def test_a_command_line_after_the_test_process_imported_opencv_is_still_forked(tmp_path: Path) -> None:
    """Importing OpenCV (Stable-Baselines3 and gymnasium's Atari wrappers do) prepends its folder to
    LD_LIBRARY_PATH for the processes this one starts: the command lines of every later test in
    this process got a new interpreter each, seconds of CPU, until they were given the value the
    process started with."""
    import cv2  # noqa: F401

    assert os.environ.get("LD_LIBRARY_PATH") != shell_env({}).get("LD_LIBRARY_PATH")
    run = start_cli("plugins", "--kind", "tracker", cwd=tmp_path)
    assert isinstance(run, ForkedCli), "not forked: FRAMEWORK_TESTS_ZYGOTE_LOG=PATH says why"
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 0 and "mlflow" in out


def test_a_command_line_after_torch_set_its_compile_cache_folder_is_still_forked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's first optimizer imports torch._dynamo, which sets TORCHINDUCTOR_CACHE_DIR for the
    processes this one starts. The zygote has imported it too (each run saves ~1.5 CPU-s), so that
    variable counts there: a command line is given it as this process started, and still forked."""
    first = run_cli("plugins", "--kind", "tracker", cwd=tmp_path)  # the zygote has started
    assert first.returncode == 0 and "torch._inductor" in ZYGOTE.imported
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # as torch sets it
    run = start_cli("plugins", "--kind", "tracker", cwd=tmp_path)
    assert isinstance(run, ForkedCli), "not forked: FRAMEWORK_TESTS_ZYGOTE_LOG=PATH says why"
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 0 and "mlflow" in out
