"""Token ids through the real server, on SQLite and PostgreSQL: revoking the newest token
never hands its id to the next one."""

from __future__ import annotations

from phalanx.control.server import Server
from tests.integration.control.serving import Api


def test_a_revoked_tokens_id_is_never_handed_out_again(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    admin.user("alice")
    seen: set[int] = set()
    for label in ("one", "two", "three"):
        made = admin.post("/api/v1/users/alice/tokens", {"label": label})
        assert made["id"] not in seen, f"token id {made['id']} handed out twice"
        seen.add(made["id"])
        assert admin.http.delete(f"/api/v1/tokens/{made['id']}").status_code == 204
    listed = admin.get("/api/v1/users/alice/tokens")
    assert all(token["id"] not in seen for token in listed)
