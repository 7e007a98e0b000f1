"""The documents by example of docs/getting-started.md, applied exactly as printed to a
real server (the cluster given to the server, the queues and jobs through
``phalanx apply``), and the jobs run to what the page says of them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.control.serving import Api, running_server
from tests.integration.control.test_cli import ok, phalanx

ROOT = Path(__file__).resolve().parents[3]
SECTION = "## Documents by example"


def readme_blocks() -> list[str]:
    """The fenced YAML blocks of the getting-started page's documents section, in order."""
    text = (ROOT / "docs" / "getting-started.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)


def test_the_readme_documents_apply_as_printed_and_their_jobs_do_what_it_says(
    tmp_path: Path,
) -> None:
    cluster, queues, jobs = readme_blocks()
    (tmp_path / "queues.yaml").write_text(queues)
    (tmp_path / "jobs.yaml").write_text(jobs)
    with running_server(tmp_path, cluster=cluster) as server:
        applied = phalanx(
            server, "apply", "-f", str(tmp_path / "queues.yaml"), "-f", str(tmp_path / "jobs.yaml")
        )
        assert ok(applied).split() == [
            "queue/vision", "created", "queue/nlp", "created",
            "job/gang", "created", "job/sweep", "created", "job/flaky", "created",
        ]  # fmt: skip
        api = Api(server.url, server.admin_token or "")
        for name in ("gang", "sweep", "flaky"):
            assert api.wait_phase(name, "Succeeded", "Failed")["phase"] == "Succeeded", name
        gang = ok(phalanx(server, "logs", "gang", "--all"))
        assert "rank 0 of 2" in gang and "rank 1 of 2" in gang
        cards = {task["gpus"][0] for task in api.job("sweep")["tasks"]}
        nodes = {task["node"] for task in api.job("sweep")["tasks"]}
        assert len(cards) == 1 and len(nodes) == 1  # two halves of one card
        flaky = api.job("flaky")
        assert flaky["attempts"] == 1
        assert "second try" in ok(phalanx(server, "logs", "flaky"))
