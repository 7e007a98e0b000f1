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
from tests.integration.control.console import signed_in
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
        anonymous = httpx.Client(base_url=server.url)
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
        # research holds 4 GPUs over its configured 2: borrowing (once the controller's
        # view, published after the tick, shows them)

        def research_row() -> str:
            page = visitor.get("/fragments/admin").text
            row = page[page.index('data-queue="research"') :]
            return row[: row.index("</tr>")]

        row = wait_for(lambda: "flag borrowing" in (r := research_row()) and r, "borrowing flagged")
        assert 'data-configured="2.0"' in row
