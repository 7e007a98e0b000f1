"""What the admin view needs from the API, and shows, on a real server: the server's own
metrics history (``/api/v1/system/history``: the metrics token or an admin's, as
``/metrics``), each node's network place, each queue's configured and computed deserved
share; the admin page's charts of that history and its heatmap grouped by network place.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from phalanx.client import Client
from tests.integration.control.console import Visitor, signed_in
from tests.integration.control.serving import Api, role, running_server, wait_for

#: Four 2-GPU nodes under two top-of-rack switches and one spine.
RACKS = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodeGroups:
  - name: gpu
    count: 4
    resources: {cpu: 8, memory: 32Gi}
    gpus: {count: 2, model: virtual, memory: 16Gi}
    network: {tor: "tor-{index // 2}", spine: spine-0}
"""


def test_the_history_the_network_places_and_the_configured_shares_reach_the_api(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path, cluster=RACKS) as server:
        token = server.admin_token
        assert token is not None
        admin = Api(server.url, token)
        admin.queue("fixed", deserved={"gpu": 2})
        admin.queue("weighted")
        admin.submit("two", "weighted", role(gpu=2, command=["sleep", "600"]))
        admin.wait_phase("two", "Running")

        # the history: who may read it, and its shape
        anonymous = httpx.Client(base_url=server.url, timeout=30)
        assert anonymous.get("/api/v1/system/history").status_code == 401
        carol = admin.user("carol")
        refused = carol.http.get("/api/v1/system/history")
        assert refused.status_code == 403 and refused.json()["fix"]
        scraper = {"Authorization": f"Bearer {server.metrics_token}"}
        assert anonymous.get("/api/v1/system/history", headers=scraper).status_code == 200
        anonymous.close()
        with Client(server.url, token) as client:
            history = wait_for(
                lambda: (h := client.history()).buckets and sum(b.started for b in h.buckets) and h,
                "a session that started a job in the history",
            )
            assert history.bucket_seconds == 10.0 and history.retention_seconds == 6 * 3600
            assert all(b.start % 10 == 0 for b in history.buckets)
            assert [b.start for b in history.buckets] == sorted(b.start for b in history.buckets)
            newest = history.buckets[-1]
            wait_for(
                lambda: (
                    (last := client.history().buckets[-1]).gpu_ratio is not None
                    and last.gpu_ratio > 0
                ),
                "the GPU ratio recorded",
            )
            assert client.history(since=newest.start + 3600).buckets == []

            # each node's network place
            nodes = {node.name: node.network for node in client.nodes()}
            assert nodes == {
                "gpu-0": {"tor": "tor-0", "spine": "spine-0"},
                "gpu-1": {"tor": "tor-0", "spine": "spine-0"},
                "gpu-2": {"tor": "tor-1", "spine": "spine-0"},
                "gpu-3": {"tor": "tor-1", "spine": "spine-0"},
            }
            assert client.node("gpu-3").network == {"tor": "tor-1", "spine": "spine-0"}

            # configured and computed deserved shares
            queues = {queue.name: queue for queue in client.queues()}
            assert queues["fixed"].configured_deserved == {"gpu": 2}
            assert queues["weighted"].configured_deserved is None
            weighted = queues["weighted"]
            assert weighted.share_computed and weighted.allocated["gpu"] == 2
            assert weighted.deserved["gpu"] >= 2  # its share covers what it holds
        metrics = admin.http.get("/metrics").text
        assert 'phalanx_queue_over_quota{queue="weighted"} 0.0' in metrics


def test_the_admin_page_charts_the_history_and_groups_nodes_by_network_place(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path, cluster=RACKS) as server:
        token = server.admin_token
        assert token is not None
        admin = Api(server.url, token)
        admin.queue("research", deserved={"gpu": 2})
        admin.submit("big", "research", role(gpu=2, replicas=2, command=["sleep", "600"]))
        admin.wait_phase("big", "Running")
        visitor = signed_in(server.url, token)

        def started_total() -> float:
            page = visitor.get("/fragments/admin").text
            found = re.search(
                r'data-series="started" data-points="\d+" data-total="([\d.]+)"', page
            )
            assert found is not None, page[:2000]
            return float(found.group(1))

        wait_for(lambda: started_total() >= 1, "the started job charted")
        page = visitor.get("/admin").text
        for series in ("latency-mean", "latency-max", "started", "evicted", "pending", "gpu-ratio"):
            assert f'data-series="{series}"' in page
        assert re.search(r'<svg class="spark"[^>]*>.*?<polyline points="[\d., ]+">', page, re.S)
        headings = re.findall(r"<h3>network domain ([\w-]+)", page)
        assert headings == ["tor-0", "tor-1"]
        assert "(spine spine-0)" in page
        # research holds 4 GPUs over its configured 2: borrowing GPUs (once the
        # controller's view, published after the tick, shows them), not CPU, which its
        # share leaves out

        row = wait_for(
            lambda: "flag borrowing" in (r := _queue_row(visitor, "research")) and r,
            "borrowing flagged",
        )
        assert 'data-configured="2.0"' in row
        assert _borrowed(row) == ["gpu"] and "4 / 2 share, 2 borrowed" in row


def test_a_queue_holding_cpu_without_a_cpu_guarantee_is_not_borrowing_gpus(
    tmp_path: Path,
) -> None:
    # issue 37: guaranteed 4 GPUs and no CPU, holding half a GPU and 2 CPUs, the queue
    # was flagged "borrowing": it holds CPU above its CPU guarantee of 0, which is no
    # borrowing (its share of CPU, by weight, covers it), and far less than its GPUs
    with running_server(tmp_path, cluster=RACKS) as server:
        token = server.admin_token
        assert token is not None
        admin = Api(server.url, token)
        admin.queue("small", guarantee={"gpu": 4, "cpu": 0})
        admin.queue("fixed", deserved={"gpu": 2})
        admin.submit("half", "small", role(gpu=0.5, cpu=2, command=["sleep", "600"]))
        admin.submit("four", "fixed", role(gpu=2, replicas=2, command=["sleep", "600"]))
        admin.wait_phase("half", "Running")
        admin.wait_phase("four", "Running")
        visitor = signed_in(server.url, token)
        # both held, as the last session's shares judge them
        small = wait_for(
            lambda: "0.5 / " in (r := _queue_row(visitor, "small")) and r, "small's GPU shown"
        )
        assert 'data-resource="cpu" data-allocated="2000.0"' in small
        assert "flag borrowing" not in small
        fixed = wait_for(
            lambda: "4 / 2 share" in (r := _queue_row(visitor, "fixed")) and r, "fixed's GPUs"
        )
        assert _borrowed(fixed) == ["gpu"]
        with Client(server.url, token) as client:
            queues = {queue.name: queue for queue in client.queues()}
        assert queues["small"].allocated["cpu"] > queues["small"].guarantee.get("cpu", 0)
        assert queues["small"].deserved["cpu"] >= queues["small"].allocated["cpu"]


def _queue_row(visitor: Visitor, queue: str) -> str:
    """The admin fragment's row of ``queue``."""
    page = visitor.get("/fragments/admin").text
    row = page[page.index(f'data-queue="{queue}"') :]
    return row[: row.index("</tr>")]


def _borrowed(row: str) -> list[str]:
    """The resources a queue's row flags borrowed, in order."""
    return re.findall(r'<span class="flag borrowing" data-borrowed="([\w./-]+)"', row)
