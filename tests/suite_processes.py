"""The test processes themselves, a pytest plugin of the suite's (tests/conftest.py names it): one torch
thread each, bytecode cached, a cache folder of the suite's own; the numba kernels compiled once
where they are cold, with the tests that reach them after the others; the tests of a shared server
grouped into one pytest-xdist process."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread in each test process, as in each worker of a run: pytest-xdist runs a
    process per core, and torch's own threads beside them would spin against each other. Where the
    numba kernels of Gomoku and the search are cold and the tests play Gomoku, they are compiled
    once (here, in pytest-xdist's controller) beside the tests that reach none, which run first."""
    import torch

    torch.set_num_threads(1)
    # Each of the suite's interpreters (test processes, zygotes, runs, Ray's workers) would compile
    # the project's modules again where the environment says not to cache them: ~0.2 CPU-s apiece.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    if "FRAMEWORK_CACHE_DIR" not in os.environ:  # the suite's own (its workers inherit it), not the user's
        os.environ["FRAMEWORK_CACHE_DIR"] = _own_cache.setdefault(
            "dir", tempfile.mkdtemp(prefix="framework-test-cache-")
        )
    if not hasattr(config, "workerinput") and _plays_gomoku(config.args):
        from tests import numba_warmup

        if numba_warmup.cold(numba_warmup.kernel_sources()):
            _warming.append(numba_warmup.Background())
            os.environ[numba_warmup.DONE_ENV] = str(_warming[0].done)  # the test processes' to wait on


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """One torch thread again after a test that loaded a player or ran a run in this process (each
    sets torch's threads for its process): the tests after it trained on two threads spinning
    against the other test process, 3 CPU-s becoming 13."""
    try:
        return (yield)
    finally:
        torch = sys.modules.get("torch")
        if torch is not None and torch.get_num_threads() != 1:
            torch.set_num_threads(1)


#: The warm-up this process started, if any.
_warming: list[Any] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    said = _warming.pop().end() if _warming else ""
    if said:
        terminalreporter.write_line(said)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _warming:
        _warming.pop().end()
    if "dir" in _own_cache:  # made by this process: removed by it
        shutil.rmtree(_own_cache.pop("dir"), ignore_errors=True)


#: The cache folder this process made for the suite (FRAMEWORK_CACHE_DIR), if it made one.
_own_cache: dict[str, str] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that reaches the kernels waits for a warm-up under way to have compiled them."""
    from tests import numba_warmup

    done = os.environ.get(numba_warmup.DONE_ENV)
    if done and _reaches_kernels(item.path):
        numba_warmup.wait_for(Path(done))


#: The tests that reach the numba kernels, most of them through runs.
KERNEL_TESTS = tuple(REPO / "tests" / name for name in ("alphazero", "gomoku", "mcts", "test_eval_seeds.py"))


def _reaches_kernels(path: Path) -> bool:
    return any(path == d or d in path.parents for d in KERNEL_TESTS)


def _plays_gomoku(args: list[str]) -> bool:
    """Whether the tests named on the command line (folders, files or node ids) include kernel tests."""
    for arg in args or ["."]:
        path = Path(arg.split("::")[0]).resolve()
        if _reaches_kernels(path) or any(path in d.parents for d in KERNEL_TESTS):
            return True
    return False


#: Fixtures that start a server or take a minute to make (a regular install of the package): their
#: tests run in one pytest-xdist process (one group each), so that the suite makes each once, not
#: once per process.
SHARED_SERVERS = {"ray_session": "ray", "mlflow_server": "mlflow-server", "wheel_install": "wheel-install"}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Mark each test of a shared server with its group, before pytest-xdist reads the groups into
    node ids; then check that it did, as a silent failure starts every server once per process.
    While the kernels are being compiled, the tests that reach them come last."""
    from tests import numba_warmup

    if os.environ.get(numba_warmup.DONE_ENV):  # the kernels' tests after the others, as they compile
        items.sort(key=lambda item: _reaches_kernels(item.path))
    grouped: dict[pytest.Item, str] = {}
    for item in items:
        for fixture, group in SHARED_SERVERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
                grouped[item] = group
                break
    yield
    if getattr(config.option, "loadgroup", False):  # a pytest-xdist worker under --dist loadgroup
        lost = [item.nodeid for item, group in grouped.items() if not item.nodeid.endswith(f"@{group}")]
        if lost:  # said on the terminal too: pytest-xdist's controller reports only a crashed worker
            raise _said(
                f"pytest-xdist did not group {len(lost)} tests of a shared server (first: {lost[0]}), "
                "as under pytest 9.2 (pytest-xdist issue 1386): install the test extra's pytest "
                '(pip install -e ".[test]") or run one process (-n 0)'
            )


def _said(message: str) -> pytest.UsageError:
    print(f"\nERROR: {message}", file=sys.__stderr__, flush=True)
    return pytest.UsageError(message)
