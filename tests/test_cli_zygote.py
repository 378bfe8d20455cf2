"""The tests' zygote (tests/cli_zygote.py): which command lines it may run, by their environment."""

from __future__ import annotations

import pytest

from tests.cli_zygote import forkable

ZYGOTE = {"PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"}


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
        # A run left the hashes' seed set in the test process: nothing a run computes reads it.
        ({"PYTHONHASHSEED": "3"}, [], True),
        # What `python -m framework` sets itself before it imports torch, set already.
        ({"GOMP_SPINCOUNT": "10000"}, [], True),
        ({"GOMP_SPINCOUNT": "0"}, [], False),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, [], False),
        ({"OMP_NUM_THREADS": "1"}, [], False),
        ({"PYTHONDONTWRITEBYTECODE": "1"}, [], False),
        ({"HYDRA_FULL_ERROR": "1"}, [], False),
    ],
)
def test_a_command_line_is_forked_only_where_its_load_time_environment_is_the_zygotes(
    extra: dict[str, str], imported: list[str], expected: bool
) -> None:
    assert forkable({**ZYGOTE, "HOME": "/elsewhere", **extra}, ZYGOTE, imported) is expected
