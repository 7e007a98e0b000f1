"""Simulator reports shared by a real server started with ``--reports DIR``: the API
lists and serves exactly the reports of DIR (a ``phalanx sim compare`` output folder, an
SVG, a JSON file) to signed-in users, under a Content-Security-Policy that allows no
script; it refuses every way out of DIR (``..``, encoded, absolute, symbolic links to a
file or a folder outside, a FIFO, a folder without a report, other files); the console
lists them and shows one in a sandboxed frame under the same policy; a server without
``--reports`` says how to share them."""

from __future__ import annotations

import http.client
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.control.server import Server
from tests.integration.control.console import signed_in
from tests.integration.control.serving import Api, running_server

#: SQLite only: reports are files of a folder: no row of the store is read.
BACKENDS = ("sqlite",)

SECRET = "TOPSECRET-outside-the-reports-folder"
HOSTILE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
    "<script>document.title='pwned'</script><rect width='40' height='20'/></svg>"
)
#: Requests sent as they are written (no client normalizes them first): none may leave DIR.
ESCAPES = (
    "/api/v1/reports/..",
    "/api/v1/reports/../../secret.html",
    "/api/v1/reports/%2e%2e",
    "/api/v1/reports/%2E%2E%2Fsecret.html",
    "/api/v1/reports/..%2Fsecret.html",
    "/api/v1/reports/%2Fetc%2Fpasswd",
    "/api/v1/reports//etc/passwd",
    "/api/v1/reports/escape.html",
    "/api/v1/reports/linked",
    "/api/v1/reports/empty",
    "/api/v1/reports/notes.txt",
    "/api/v1/reports/pipe.html",
    "/api/v1/reports/fifo-vs-tiresias%2Freport.html",
    "/api/v1/reports/fifo-vs-tiresias/report.html",
    "/api/v1/reports/.hidden.html",
)


#: A synthetic workload that keeps the pollux preset busy (the policies differ on it).
BUSY = "jobs: 300\nrate: 0.05\ngpusPerNode: 4\n"


def compare_into(folder: Path, scratch: Path) -> None:
    """``phalanx sim compare`` of FIFO and Tiresias on a busy synthetic workload (its
    parameters written in ``scratch``) into ``folder``."""
    workload = scratch / "busy.yaml"
    workload.write_text(BUSY)
    result = CliRunner().invoke(
        app,
        [
            *("sim", "compare", "--cluster", "pollux", "--workload", f"synthetic:{workload}"),
            *("--scheduler", "fifo", "--scheduler", "tiresias-las", "--out", str(folder)),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (folder / "report.html").is_file()


def reports_folder(tmp_path: Path, compared: Path) -> Path:
    """DIR with three reports (a copy of ``compared`` among them) and every kind of
    entry that is not one."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.html").write_text(SECRET)
    (outside / "report.html").write_text(SECRET)
    folder = tmp_path / "reports"
    shutil.copytree(compared, folder / "fifo-vs-tiresias")
    (folder / "chart.svg").write_text(HOSTILE_SVG)
    (folder / "figures.json").write_text('{"avg_jct_s": 12.5}')
    (folder / "notes.txt").write_text("not a report")
    (folder / ".hidden.html").write_text("a name must start with a letter or digit")
    (folder / "empty").mkdir()
    (folder / "escape.html").symlink_to(outside / "secret.html")
    (folder / "linked").symlink_to(outside)
    os.mkfifo(folder / "pipe.html")
    (tmp_path / "secret.html").write_text(SECRET)
    return folder


def raw_get(url: str, path: str, token: str) -> tuple[int, str]:
    """GET ``path`` exactly as written."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        answer = connection.getresponse()
        return answer.status, answer.read().decode(errors="replace")
    finally:
        connection.close()


def test_the_api_serves_the_reports_of_its_folder_and_nothing_outside_it(
    tmp_path: Path,
    compared: Path,
) -> None:
    with running_server(tmp_path, reports=reports_folder(tmp_path, compared)) as server:
        api = Api(server.url, server.admin_token or "")
        bob = api.user("bob")
        listed = {r["name"]: r for r in bob.get("/api/v1/reports")}
        assert set(listed) == {"fifo-vs-tiresias", "chart.svg", "figures.json"}
        assert listed["fifo-vs-tiresias"]["media_type"] == "text/html"
        assert listed["chart.svg"]["media_type"] == "image/svg+xml"
        assert all(r["servable"] and r["size"] > 0 for r in listed.values())
        assert bob.http.get("/api/v1/reports", headers={"Authorization": ""}).status_code == 401

        page = bob.http.get("/api/v1/reports/fifo-vs-tiresias")
        assert page.status_code == 200 and "<svg" in page.text
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "sandbox" in policy
        assert "script-src" not in policy  # scripts fall under default-src 'none'
        assert page.headers["x-content-type-options"] == "nosniff"
        svg = bob.http.get("/api/v1/reports/chart.svg")
        assert svg.headers["content-type"] == "image/svg+xml"
        assert svg.headers["content-security-policy"] == policy
        assert bob.http.get("/api/v1/reports/figures.json").json() == {"avg_jct_s": 12.5}

        for path in ESCAPES:
            status, text = raw_get(server.url, path, bob.token)
            assert status in (404, 422), (path, status, text)
            assert SECRET not in text and "root:" not in text, path


def test_the_console_lists_reports_and_shows_one_sandboxed(tmp_path: Path, compared: Path) -> None:
    with running_server(tmp_path, reports=reports_folder(tmp_path, compared)) as server:
        bob = Api(server.url, server.admin_token or "").user("bob")
        visitor = signed_in(server.url, bob.token)
        listing = visitor.get("/reports").text
        for name in ("fifo-vs-tiresias", "chart.svg", "figures.json"):
            assert f'href="/ui/reports/{name}"' in listing
        assert "notes.txt" not in listing and "escape.html" not in listing
        page = visitor.get("/reports/chart.svg").text
        assert (
            '<iframe class="report" id="report" src="/ui/reports/chart.svg/raw" sandbox=""' in page
        )
        assert "<script>" not in page  # the report is never inlined into the console
        raw = visitor.get("/reports/chart.svg/raw")
        assert raw.text == HOSTILE_SVG
        assert raw.headers["content-type"] == "image/svg+xml"
        assert "default-src 'none'" in raw.headers["content-security-policy"]
        assert "sandbox" in raw.headers["content-security-policy"]
        # (a bare ".." is resolved by httpx before sending: the API test sends it as it is)
        for name in ("escape.html", "linked", "%2e%2e", "..%2Fsecret.html", "notes.txt"):
            for path in (f"/reports/{name}", f"/reports/{name}/raw"):
                answer = visitor.http.get(path)
                assert answer.status_code in (404, 422), (path, answer.status_code)
                assert SECRET not in answer.text


def test_a_server_without_reports_says_how_to_share_them(server: Server) -> None:
    api = Api(server.url, server.admin_token or "")
    refused = api.get("/api/v1/reports", expect=404)
    assert refused["field"] == "--reports" and "phalanx up --reports DIR" in refused["fix"]
    assert api.get("/api/v1/reports/anything", expect=404)["field"] == "--reports"
    visitor = signed_in(server.url, api.token)
    page = visitor.get("/reports").text
    assert 'id="reports-off"' in page and "phalanx up --reports REPORTS" in page
    assert 'href="/ui/reports"' in page  # the nav's link
