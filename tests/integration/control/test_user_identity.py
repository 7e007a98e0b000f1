"""Users and the Unix identity their tasks run as, through the API, on each database.

Per-user identities are what a server run as root gives: those tests need root. The
single-user refusal is checked here with the server's "am I root" decision given to it
(``ServerSettings.root``); tests/integration/tenancy runs a real server as an ordinary uid.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from phalanx.control.server import Server, ServerSettings
from phalanx.control.tenancy import UidRange
from phalanx.control.tenancy.accounts import id_on_host
from tests.integration.control.serving import FAST, Api, database_url

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="per-user identities need root")


@contextmanager
def serving(tmp_path: Path, **options: Any) -> Iterator[tuple[Server, Api]]:
    world = Path(tempfile.mkdtemp(prefix="phalanx-users-", dir="/tmp"))
    world.chmod(0o711)  # tasks of other uids must reach the tasks dir beside the data dir
    settings = ServerSettings(
        data_dir=world / "data", db_url=database_url(tmp_path), port=0, timing=FAST, **options
    )
    server = Server(settings)
    server.start()
    api = Api(server.url, server.admin_token or "")
    try:
        yield server, api
    finally:
        api.http.close()
        server.stop()
        shutil.rmtree(world, ignore_errors=True)


def refusal(api: Api, body: dict[str, Any], status: int) -> dict[str, Any]:
    answer = api.http.post("/api/v1/users", json=body)
    assert answer.status_code == status, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_a_server_that_is_not_root_refuses_a_second_user_saying_why_and_what_to_do(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, root=False) as (server, api):
        body = refusal(api, {"name": "bob"}, 409)
        assert body["detail"].startswith(
            f"single-user mode: this server runs as uid {os.geteuid()}"
        )
        assert body["field"] == "name" and "--shared-identity" in body["fix"]
        assert [u["name"] for u in api.get("/api/v1/users")] == ["admin"]
        assert server.tenancy.describe().startswith("single-user")


def test_a_shared_identity_admits_users_without_a_uid_and_no_account(tmp_path: Path) -> None:
    with serving(tmp_path, root=False, shared_identity=True) as (_, api):
        made = api.post("/api/v1/users", {"name": "bob"})
        assert (made["user"], made["uid"], made["account"]) == ("bob", None, None)
        body = refusal(api, {"name": "carl", "account": "nobody"}, 422)
        assert body["field"] == "account" and "would not be used" in body["detail"]


@ROOT_ONLY
def test_as_root_each_user_gets_a_uid_of_their_own_never_reused(tmp_path: Path) -> None:
    uids = UidRange(first=71000, last=71003)
    with serving(tmp_path, task_uids=uids) as (server, api):
        free = [uid for uid in range(71000, 71004) if not id_on_host(uid)]
        users = {u["name"]: u["uid"] for u in api.get("/api/v1/users")}
        assert users == {"admin": free[0]}  # the bootstrap admin got one too
        bob = api.post("/api/v1/users", {"name": "bob"})
        assert (bob["uid"], bob["account"]) == (free[1], None)
        api.http.delete("/api/v1/users/bob")
        again = api.post("/api/v1/users", {"name": "bob"})
        assert again["uid"] == free[2]  # bob's old uid went with him, to no one
        assert server.tenancy.describe() == (
            "per-user: each user's own uid (allocated from 71000-71003, or an account)"
        )
        if len(free) == 4:
            api.post("/api/v1/users", {"name": "dan"})
            body = refusal(api, {"name": "eve"}, 409)
            assert "every uid of 71000-71003 has been allocated" in body["detail"]
            assert "--task-uids" in body["fix"]


@ROOT_ONLY
def test_as_root_an_existing_account_can_be_named_but_not_root_a_missing_one_or_twice(
    tmp_path: Path,
) -> None:
    account = next((e for e in pwd.getpwall() if e.pw_uid not in (0,) and e.pw_gid != 0), None)
    if account is None:
        pytest.skip("no account on this host that is not root's")
    with serving(tmp_path) as (_, api):
        made = api.post("/api/v1/users", {"name": "carl", "account": account.pw_name})
        assert (made["uid"], made["account"]) == (account.pw_uid, account.pw_name)
        listed = {u["name"]: (u["uid"], u["account"]) for u in api.get("/api/v1/users")}
        assert listed["carl"] == (account.pw_uid, account.pw_name)
        twice = refusal(api, {"name": "carla", "account": account.pw_name}, 409)
        assert (
            twice["field"] == "account"
            and "already the identity of another user" in twice["detail"]
        )
        root = refusal(api, {"name": "rooty", "account": "root"}, 422)
        assert root["field"] == "account" and "is root" in root["detail"]
        missing = refusal(api, {"name": "ghost", "account": "no-such-account"}, 422)
        assert missing["field"] == "account" and "useradd" in missing["fix"]
        bad = refusal(api, {"name": "weird", "account": "a b"}, 422)
        assert bad["field"] == "body.account"
        names = [u["name"] for u in api.get("/api/v1/users")]
        assert names == ["admin", "carl"]  # nothing refused was kept
