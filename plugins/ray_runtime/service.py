"""The `ray` section of a run: the Ray its plugins share (runtime), as a service of the run."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Optional

from framework.values import bounds

from . import runtime


# Optional[...] in the schema: OmegaConf 2.3 cannot read PEP 604 unions.
@dataclass
class RayConfig:
    address: Optional[str] = None
    """The Ray cluster a run that uses Ray joins (auto, host:6379, ray://host:10001); null: a local
    Ray on 127.0.0.1, started when the run first needs it and stopped with the run."""
    num_cpus: Optional[int] = field(default=None, metadata=bounds(ge=1))
    """CPUs the local Ray offers its actors (null: this machine's count)."""
    num_gpus: Optional[int] = field(default=None, metadata=bounds(ge=0))
    """GPUs the local Ray offers (null: those it finds)."""
    init_timeout_s: float = field(default=120.0, metadata=bounds(gt=0))
    """How long starting or joining Ray may take before the run fails saying so."""


class RayService:
    """Ray for the run's plugins: a local Ray on 127.0.0.1 started on first use, or a cluster joined."""

    Config: ClassVar[type] = RayConfig

    def __init__(self, cfg: RayConfig) -> None:
        self.cfg = cfg

    def open(self) -> None:
        runtime.configure(self.cfg)

    def close(self, *, at_once: bool = False) -> None:
        runtime.shutdown(at_once=at_once)


if TYPE_CHECKING:
    from framework.contracts.service import RunService

    _service: type[RunService] = RayService
