"""A fan-out whose few failing items leave the others finishing (``onFailure:
continue``), and a resume that reruns only those items (issue 19, evidence 3); a list
over ``maxItems`` fails its step with the reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.control.serving import running_server
from tests.integration.control.test_cli import ok, phalanx
from tests.integration.control.test_pipelines import admin, ended, pipeline, run

# Items 3, 7 and 11 fail while the file BAD exists; every run of an item is counted.
SWEEP = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: sweep}
spec:
  onFailure: continue
  defaults: {queue: wf, resources: {cpu: 100m, memory: 64Mi}}
  steps:
    each:
      foreach: {items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], maxItems: 20, maxParallel: 4}
      command: ["sh", "-c", "echo {{item}} >> DIR/runs; if [ -e DIR/BAD ]; then case {{item}} in 3|7|11) exit 1;; esac; fi"]
"""

OVERSIZED = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: oversized}
spec:
  defaults: {queue: wf, resources: {cpu: 100m, memory: 64Mi}}
  steps:
    items:
      command: "python3 -c 'import json; print(json.dumps(list(range(30))))' > {{outputs.list}}"
      outputs: {params: {list: {type: list}}}
    each:
      foreach: {items: "{{steps.items.outputs.list}}", maxItems: 20}
      command: "echo {{item}}"
"""


def runs_of(directory: Path) -> list[int]:
    return sorted(int(line) for line in (directory / "runs").read_text().split())


def test_failing_items_leave_the_others_finishing_and_a_resume_reruns_only_them(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "BAD").touch()
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(SWEEP.replace("DIR", str(scratch))))
        first = run(api, "sweep")
        view = ended(api, first, timeout=120)
        assert view["phase"] == "Failed", json.dumps(view, indent=1)
        phases = {s["unit"]: s["phase"] for s in view["steps"] if s["unit"].startswith("each[")}
        failed = sorted(unit for unit, phase in phases.items() if phase == "Failed")
        assert failed == ["each[11]", "each[3]", "each[7]"], phases
        assert sum(phase == "Succeeded" for phase in phases.values()) == 9
        assert runs_of(scratch) == list(range(12))

        (scratch / "BAD").unlink()
        (scratch / "runs").unlink()
        second = ok(phalanx(server, "pipeline", "resume", first)).strip()
        resumed = ended(api, second, timeout=120)
        assert resumed["phase"] == "Succeeded", json.dumps(resumed, indent=1)
        assert runs_of(scratch) == [3, 7, 11]  # only the failed items ran again


def test_a_list_over_max_items_fails_its_step_with_the_reason(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(OVERSIZED))
        view = ended(api, run(api, "oversized"), timeout=60)
        assert view["phase"] == "Failed"
        each = [s for s in view["steps"] if s["unit"].startswith("each")]
        assert each and "maxItems" in json.dumps(each), json.dumps(view, indent=1)
