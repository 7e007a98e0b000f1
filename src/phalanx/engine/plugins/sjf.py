"""sjf: shortest job first, by the job's runtime estimate (else its walltime).

Jobs without either go last, in arrival order. With true run times as estimates
(the simulator's oracle mode) this is the classic SJF-oracle baseline.
"""

from __future__ import annotations

import math

from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo


class SjfPlugin(Plugin[None]):
    """Orders jobs by expected run time, shortest first."""

    name = "sjf"

    def open(self, session: Session) -> None:
        """Nothing per session: the order depends on the job alone."""

    def job_order(self, state: None, job: JobInfo) -> float:
        spec = job.spec
        if spec.runtime_estimate is not None:
            return spec.runtime_estimate
        return spec.walltime if spec.walltime is not None else math.inf
