"""Job lifecycle through the real server, with real processes: run, fail and retry as a
gang, preemption with SIGTERM, walltime, cancel."""

from __future__ import annotations

from pathlib import Path

from tests.integration.control.serving import Api, role, running_server, wait_for


def test_a_job_runs_to_success_with_its_rendezvous(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        command = "echo rank=$RANK world=$WORLD_SIZE job=$PHALANX_JOB gpus=$CUDA_VISIBLE_DEVICES"
        api.submit("hello", "team-a", role(replicas=2, command=command, gpu=1))
        job = api.wait_phase("hello", "Succeeded")
        assert [t["phase"] for t in job["tasks"]] == ["Succeeded", "Succeeded"]
        assert all(t["exit_code"] == 0 and len(t["gpus"]) == 1 for t in job["tasks"])
        logs = api.http.get("/api/v1/jobs/hello/logs", params={"task": "hello-worker-1"}).text
        assert "rank=1 world=2 job=hello" in logs
        kinds = [e["kind"] for e in api.get("/api/v1/jobs/hello/events")]
        assert kinds == ["Queued", "Placed", "Running", "Succeeded"]


def test_a_failing_worker_restarts_the_whole_gang_up_to_max_retry(tmp_path: Path) -> None:
    starts = tmp_path / "starts.log"
    # Every task logs its start; worker 2 fails once the other two logged this attempt's
    # start (failing at once, it could end the gang before a busy machine ran their
    # echo), the others would run for a minute.
    count = f"grep -c gang-worker-$i {starts}"
    command = (
        f'echo "$PHALANX_TASK" >> {starts}; if [ "$PHALANX_INDEX" = 2 ]; then '
        f"mine=$({count.replace('$i', '2')}); "
        f"for i in 0 1; do while [ $({count}) -lt $mine ]; do sleep 0.05; done; done; "
        "exit 3; fi; exec sleep 60"
    )
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        api.submit("gang", "team-a", role(replicas=3, command=command), maxRetry=2)
        job = api.wait_phase("gang", "Failed")
        assert job["attempts"] == 3
        assert job["reason"] == "RetriesExhausted"
        lines = starts.read_text().split()
        # three attempts, each of the whole gang of three
        assert sorted(lines) == sorted([f"gang-worker-{i}" for i in range(3)] * 3)
        failed = [t for t in job["tasks"] if t["exit_code"] == 3]
        assert [t["name"] for t in failed] == ["gang-worker-2"]
        events = [e["kind"] for e in api.get("/api/v1/jobs/gang/events")]
        assert events.count("TaskFailed") == 3
        assert events.count("Pending") == 2  # two retries went back to Pending


def test_a_preempted_task_observes_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "term.log"
    trap = f"trap 'echo TERM >> {marker}; exit 0' TERM; echo started >> {marker}; while true; do sleep 0.1; done"
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        api.submit("low", "team-a", role(replicas=2, command=trap, gpu=4), priority=1)
        api.wait_phase("low", "Running")
        wait_for(
            lambda: marker.exists() and marker.read_text().count("started") == 2, "low started"
        )
        api.submit("high", "team-a", role(replicas=2, command="sleep 1", gpu=4), priority=100)
        api.wait_phase("high", "Running", "Succeeded")
        assert "TERM" in marker.read_text()
        low = api.job("low")
        assert low["preemptions"] >= 1
        assert low["phase"] in ("Pending", "Queued", "Running")
        assert low["attempts"] == 0  # an eviction costs no retry
        # once the high-priority job is done the low one runs again
        api.wait_phase("high", "Succeeded")
        wait_for(lambda: marker.read_text().count("started") >= 3, "low restarted")


def test_walltime_stops_a_job_for_good(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        api.submit("slow", "team-a", role(command="sleep 60"), walltime="1s")
        job = api.wait_phase("slow", "Failed")
        assert job["reason"] == "WalltimeExceeded"
        assert job["tasks"][0]["exit_code"] in (143, 137, -15)


def test_cancel_stops_the_tasks(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        api.submit("long", "team-a", role(replicas=2, command="sleep 60"))
        api.wait_phase("long", "Running")
        wait_for(
            lambda: all(t["phase"] == "Running" for t in api.job("long")["tasks"]), "tasks running"
        )
        api.post("/api/v1/jobs/long/cancel", expect=200)
        job = api.wait_phase("long", "Cancelled")
        assert all(t["phase"] == "Failed" for t in job["tasks"])


def test_workers_start_after_the_master_is_running(tmp_path: Path) -> None:
    order = tmp_path / "order.log"
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        seen = "$PHALANX_ROLE $RANK $WORLD_SIZE $MASTER_PORT $PHALANX_HOSTS_WORKER"
        master = role("master", command=f"echo {seen} >> {order}; sleep 1")
        worker = role("worker", replicas=2, command=f"echo {seen} >> {order}")
        worker["dependsOn"] = [{"role": "master", "phase": "Running"}]
        api.submit("mw", "team-a", master, worker)
        api.wait_phase("mw", "Succeeded")
        lines = [line.split() for line in order.read_text().splitlines()]
        assert [line[0] for line in lines] == ["master", "worker", "worker"]
        # The master, started alone, already knows the whole gang: the same world,
        # master port and worker addresses as the workers started after it.
        assert sorted(line[1] for line in lines) == ["0", "1", "2"]
        assert {tuple(line[2:]) for line in lines} == {tuple(lines[0][2:])}
        assert lines[0][2] == "3" and len(lines[0][4].split(",")) == 2
