"""A finished run resumed for more steps whose new part ends, failed or stopped, before it logged a
point: nothing of the run changed, so it stays FINISHED (its name, budget and end as they were), and
the part's end and error are tags of that part's own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework.provenance import RESUMES_TAG, TOTAL_STEPS_TAG

#: What went wrong, on a FAILED run (framework.endings); a resume moves it aside.
ERROR_TAG = "framework.error"
#: MLflow's tag of a run's name: setting it renames the run.
NAME_TAG = "mlflow.runName"
#: Seconds a resumed run spent ended between its parts: its duration is its end less its start less these.
PAUSED_TAG = "framework.paused_s"


@dataclass
class FinishedBefore:
    """What a FINISHED run was as a resume reopened it, put back if the resumed part adds nothing."""

    part: int
    name: str
    end_time_ms: int | None
    total_steps: str
    paused_s: str = "0"
    went_on: bool = False
    """Whether the resumed part logged a metric point: the run is then what the part made of it."""

    @classmethod
    def of(cls, run: Any, tags: Mapping[str, str]) -> FinishedBefore | None:
        """For `run` (an MLflow Run as the resume found it) reopened with `tags`; None unless FINISHED."""
        if run.info.status != "FINISHED":
            return None
        total = run.data.tags.get(TOTAL_STEPS_TAG) or run.data.params.get("total_steps", "")
        part = str(tags.get(RESUMES_TAG, "0"))
        paused = run.data.tags.get(PAUSED_TAG, "0")
        return cls(int(part) if part.isdigit() else 0, run.info.run_name, run.info.end_time, total, paused)

    def tags(self, tags: Mapping[str, str]) -> dict[str, str]:
        """`tags` to set, with the error of a part that logged nothing as that part's own."""
        moved = dict(tags)
        if not self.went_on and ERROR_TAG in moved:
            moved[f"framework.resume{self.part}.error"] = moved.pop(ERROR_TAG)
        return moved

    def put_back(self, status: str) -> dict[str, str] | None:
        """The tags that make the run again what it was, where the part ends `status` having logged
        nothing; None where the run is what the part made of it."""
        if self.went_on or status == "FINISHED":
            return None
        tags = {NAME_TAG: self.name, f"framework.resume{self.part}.ended": status, PAUSED_TAG: self.paused_s}
        if self.total_steps:
            tags[TOTAL_STEPS_TAG] = self.total_steps
        return tags
