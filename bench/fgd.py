"""The FGD paper's experiment through the engine: one policy x seed on the default trace,
timed; prints one JSON object per line.

    .venv/bin/python bench/fgd.py                 # fgd and bestfit, seed 42
    .venv/bin/python bench/fgd.py fgd 42 43       # a policy and seeds

Reads ``../shared/traces`` (the openb trace and the authors' cached results). The full
comparison with a CSV and a chart is ``phalanx bench fgd``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from phalanx.benchmarks.fgd import POLICIES, read_expected, run_one

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"


def main(policy: str | None, seeds: list[int]) -> None:
    expected = {
        (r["sc_policy"], int(r["seed"])): r["130"]
        for r in read_expected(TRACES)
        if r["workload"] == "openb_pod_list_default"
    }
    for name in [policy] if policy else ["fgd", "bestfit"]:
        for seed in seeds or [42]:
            run = run_one(TRACES, "default", name, seed)
            theirs = expected.get((POLICIES[name], seed))
            print(
                json.dumps(
                    {
                        "policy": name,
                        "seed": seed,
                        "pods": len(run.arrived),
                        "alloc_130": run.columns().get(130),
                        "authors_130": float(theirs) if theirs else None,
                        "seconds": round(run.seconds, 2),
                    }
                )
            )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None, [int(s) for s in sys.argv[2:]])
