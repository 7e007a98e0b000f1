"""docs/tasks/usage.md as written, against a real server: its Prices document is the
server's price sheet (``phalanx up --prices FILE``), its cluster's nodes get the classes
it says (an A100 node, a reclaimable one), and each ``phalanx usage`` command of its
examples runs as an admin and says what the page says: rows per user, queue or job, the
cost at the documented prices, what an elastic job saved on the reclaimable node, the
table's columns and the CSV header the page shows, and a job's rows still there once the
job is deleted; its ``curl`` request and its SDK example answer the same; a bad price
stops ``phalanx up`` with the line the page shows."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.control.server import ServerSettings
from phalanx.executors.rendezvous import free_ports
from phalanx.spec.prices import read_prices
from tests.integration.control.serving import FAST, Api, database_url, role
from tests.integration.control.test_cli import CLEAN, ok, phalanx
from tests.integration.control.test_usage import serving

#: SQLite only: the ledger's queries run on both stores in test_usage; this is the page.
BACKENDS = ("sqlite",)

PAGE = Path(__file__).resolve().parents[3] / "docs" / "tasks" / "usage.md"
#: A heredoc of a fenced block of the page: ``cat > NAME <<'DOC'`` .. ``DOC``.
HEREDOC = re.compile(r"cat > ([\w.-]+) <<'DOC'\n(.*?)^DOC$", re.S | re.M)
CONSOLE = re.compile(r"^```console\n(.*?)^```", re.S | re.M)
PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
CURL = re.compile(r'^\$ curl .*"\$PHALANX_SERVER(/api/v1/[^"]+)"', re.M)


def documented_files() -> dict[str, str]:
    """The files the page's blocks write, by name."""
    return dict(HEREDOC.findall(PAGE.read_text()))


def documented_commands() -> list[list[str]]:
    """Each ``$ phalanx usage ...`` command of the page's console blocks, as arguments."""
    commands = []
    for block in CONSOLE.findall(PAGE.read_text()):
        for line in block.splitlines():
            if line.startswith("$ phalanx usage"):
                commands.append(shlex.split(line.removeprefix("$ phalanx ")))
    return commands


def documented_output(command: str) -> list[str]:
    """The lines the page shows under ``$ phalanx COMMAND`` (up to the next ``$``)."""
    blocks: list[str] = CONSOLE.findall(PAGE.read_text())
    for block in blocks:
        lines = block.splitlines()
        if f"$ phalanx {command}" in lines:
            start = lines.index(f"$ phalanx {command}") + 1
            shown = [line for line in lines[start:] if line.startswith("$ ")][:1]
            return lines[start : lines.index(shown[0]) if shown else len(lines)]
    raise AssertionError(f"no $ phalanx {command} in {PAGE}")


def test_the_page_documents_its_files_and_commands() -> None:
    assert {"prices.yaml", "cluster.yaml"} <= set(documented_files())
    args = [" ".join(c) for c in documented_commands()]
    assert "usage --by user --since 7d" in args and "usage --by user --since 7d -o csv" in args


def test_a_bad_price_stops_phalanx_up_as_the_page_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's prices with its a100 class's GPU at -1: ``phalanx up`` says so, as the
    page shows, before it starts anything."""
    files = documented_files()
    (tmp_path / "cluster.yaml").write_text(files["cluster.yaml"])
    bad = files["prices.yaml"].replace("prices: {gpu: 3.5}", "prices: {gpu: -1}")
    assert bad != files["prices.yaml"]
    (tmp_path / "prices.yaml").write_text(bad)
    monkeypatch.chdir(tmp_path)
    command = "up --cluster cluster.yaml --prices prices.yaml"
    (port,) = free_ports(1)
    options = ["--port", str(port), "--data-dir", str(tmp_path / "data")]
    result = CliRunner(env=CLEAN).invoke(app, [*shlex.split(command), *options])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == documented_output(command)
    assert not (tmp_path / "data").exists()


def test_the_documented_usage_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = documented_files()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    sheet = read_prices(tmp_path / "prices.yaml")
    prices = yaml.safe_load(files["prices.yaml"])["spec"]
    settings = ServerSettings(
        data_dir=tmp_path / "data",
        db_url=database_url(tmp_path),
        port=0,
        cluster=tmp_path / "cluster.yaml",
        timing=FAST,
        shared_identity=True,
        price_sheet=sheet,
    )
    elastic = role(replicas=2, command="sleep 1", gpu=1)
    elastic["elastic"] = {"minReplicas": 1, "maxReplicas": 2}
    with serving(settings, kill=True) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("research")
        alice, bob = admin.user("alice"), admin.user("bob")
        alice.submit("pretrain", "research", role(command="sleep 1", gpu=2))
        bob.submit("sweep", "research", elastic)
        alice.wait_phase("pretrain", "Succeeded")
        bob.wait_phase("sweep", "Succeeded")
        admin.http.delete("/api/v1/jobs/pretrain").raise_for_status()  # rows outlive it
        token = admin.token

        def run(*args: str) -> str:
            return ok(phalanx(server, *args, token=token))

        for command in documented_commands():
            run(*command)  # every documented command runs
        allocations = json.loads(run("usage", "--by", "allocation", "-o", "json"))["items"]
        _check_prices(allocations, prices)

        table = run("usage", "--by", "user", "--since", "7d")
        assert "usage by user" in table and "alice" in table and "bob" in table
        shown = documented_output("usage --by user --since 7d")
        assert _headers(shown) == _headers(table.splitlines()), (shown, table)

        text = run("usage", "--by", "user", "--since", "7d", "-o", "csv")
        header = documented_output("usage --by user --since 7d -o csv")[0]
        assert text.splitlines()[0] == header
        rows = {row["key"]: row for row in csv.DictReader(io.StringIO(text))}
        assert list(rows) == ["alice", "bob", "total"]
        by_user = {a["user"]: a for a in allocations}
        assert float(rows["alice"]["gpu_hours"]) == pytest.approx(
            2 * by_user["alice"]["hours"], abs=1e-6
        )
        assert float(rows["bob"]["saved"]) > 0 and float(rows["alice"]["saved"]) == 0
        by_job = json.loads(run("usage", "--by", "job", "-o", "json"))["items"]
        assert [row["key"] for row in by_job] == ["pretrain", "sweep"]  # deleted, still here

        (path,) = CURL.findall(PAGE.read_text())
        answer = admin.http.get(path).json()
        assert [row["key"] for row in answer["items"]] == ["research"]
        assert answer["total"]["cost"] == pytest.approx(sum(a["cost"] for a in allocations))
        # the SDK's example, as the admin (PHALANX_SERVER and PHALANX_TOKEN)
        monkeypatch.setenv("PHALANX_SERVER", server.url)
        monkeypatch.setenv("PHALANX_TOKEN", token)
        (sdk,) = PYTHON.findall(PAGE.read_text())
        capsys.readouterr()
        exec(compile(sdk, f"{PAGE}:python", "exec"), {})  # the page's own example
        printed = capsys.readouterr().out.splitlines()
        assert [line.split()[0] for line in printed] == ["alice", "bob", "total"]


def _headers(lines: list[str]) -> list[str]:
    """The column names of a Rich table's header line (its first line with COST)."""
    line = next(line for line in lines if "COST" in line)
    return [cell.strip() for cell in re.split(r"\s{2,}|[│┃]", line) if cell.strip()]


def _check_prices(allocations: list[dict[str, Any]], prices: dict[str, Any]) -> None:
    """Each allocation's class, cost and saving are the documented prices': a core of
    cpu, a GiB of memory and a GPU per hour, the class's over the default's, reclaimable
    nodes times the multiplier."""
    classes = {c["name"]: c for c in prices["classes"]}
    multiplier = prices["reclaimable"]["multiplier"]
    for allocation in allocations:
        held = allocation["resources"]
        amounts = {"cpu": held["cpu"] / 1000, "memory": held["memory"] / 2**30, "gpu": held["gpu"]}
        name = allocation["price_class"]
        rates = {**prices["default"], **classes.get(name, {}).get("prices", {})}
        hourly = sum(amounts[r] * rates[r] for r in amounts)
        factor = multiplier if allocation["reclaimable"] else 1.0
        assert allocation["cost"] == pytest.approx(hourly * factor * allocation["hours"])
        if allocation["job"] == "pretrain":  # not elastic: an on-demand A100 node
            assert (name, allocation["reclaimable"], allocation["saved"]) == ("a100", False, 0)
        else:  # elastic: the reclaimable node, and what it saved against on demand
            assert (name, allocation["reclaimable"]) == ("default", True), allocation
            saved = hourly * (1 - multiplier) * allocation["hours"]
            assert allocation["saved"] == pytest.approx(saved)
