"""A user's tokens through the real server: list, create with an expiry, revoke one."""

from __future__ import annotations

import time

from sqlalchemy import update

from phalanx.control.server import Server
from phalanx.control.store.models import TokenRow
from tests.integration.control.serving import Api


def test_a_user_lists_creates_and_revokes_their_own_tokens(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    alice = admin.user("alice")
    made = alice.post("/api/v1/users/alice/tokens", {"label": "laptop", "expires": "30d"})
    assert made["user"] == "alice" and made["token"].startswith("phx_")
    assert made["label"] == "laptop"
    assert 29.9 * 86400 < made["expires_at"] - made["created_at"] <= 30 * 86400

    listed = alice.get("/api/v1/users/alice/tokens")
    assert [(t["label"], t["expires_at"] is None, t["current"]) for t in listed] == [
        ("created", True, True),  # the one alice is calling with
        ("laptop", False, False),
    ]
    assert listed[1]["id"] == made["id"] and not listed[1]["expired"]
    # A token's secret is shown once, when it is made; never in a listing.
    raw = alice.http.get("/api/v1/users/alice/tokens").text
    assert made["token"] not in raw and "phx_" not in raw and '"token"' not in raw

    laptop = Api(server.url, made["token"])
    assert laptop.get("/api/v1/users/me")["name"] == "alice"
    assert alice.http.delete(f"/api/v1/tokens/{made['id']}").status_code == 204
    gone = laptop.get("/api/v1/users/me", expect=401)
    assert gone["detail"] == "unknown or revoked token" and gone["field"] == "Authorization"

    # Revoking the token in use works: the very next request is refused.
    current = next(t["id"] for t in alice.get("/api/v1/users/alice/tokens") if t["current"])
    assert alice.http.delete(f"/api/v1/tokens/{current}").status_code == 204
    alice.get("/api/v1/users/me", expect=401)


def test_users_touch_only_their_own_tokens_and_admins_anyones(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    alice, bob = admin.user("alice"), admin.user("bob")
    alices = alice.get("/api/v1/users/alice/tokens")[0]["id"]

    assert bob.get("/api/v1/users/alice/tokens", expect=403)["field"] == "name"
    assert bob.post("/api/v1/users/alice/tokens", {}, expect=403)["fix"]
    # Another user's token is reported as missing, like another user's job.
    denied = bob.http.delete(f"/api/v1/tokens/{alices}")
    assert denied.status_code == 404 and "phalanx token list" in denied.json()["fix"]
    assert alice.get("/api/v1/users/me")["name"] == "alice"
    assert bob.get("/api/v1/users/nobody/tokens", expect=403)["field"] == "name"

    assert [t["id"] for t in admin.get("/api/v1/users/alice/tokens")] == [alices]
    assert admin.get("/api/v1/users/alice/tokens")[0]["current"] is False
    assert admin.get("/api/v1/users/nobody/tokens", expect=404)["field"] == "name"
    spare = admin.post("/api/v1/users/alice/tokens", {"label": "spare"})
    assert admin.http.delete(f"/api/v1/tokens/{alices}").status_code == 204
    alice.get("/api/v1/users/me", expect=401)
    assert Api(server.url, spare["token"]).get("/api/v1/users/me")["name"] == "alice"


def test_an_expired_token_is_refused_saying_how_to_get_a_new_one(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    alice = admin.user("alice")
    made = alice.post("/api/v1/users/alice/tokens", {"label": "ci", "expires": 3600})
    # An hour passes: the stored expiry is moved into the past (the clock is not waited on).
    with server.db.session() as session:
        session.execute(
            update(TokenRow).where(TokenRow.id == made["id"]).values(expires_at=time.time() - 1)
        )
    refused = Api(server.url, made["token"]).get("/api/v1/jobs", expect=401)
    assert "expired at" in refused["detail"] and refused["field"] == "Authorization"
    assert "phalanx token create alice" in refused["fix"] and "ask an admin" in refused["fix"]
    listed = {t["id"]: t for t in alice.get("/api/v1/users/alice/tokens")}
    assert listed[made["id"]]["expired"] is True
    assert alice.http.delete(f"/api/v1/tokens/{made['id']}").status_code == 204


def test_an_expiry_that_is_not_a_duration_or_too_long_is_refused(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    for expires, wrong in (("soon", "not a duration"), ("4000d", "longer than"), (0, "positive")):
        refused = admin.post("/api/v1/users/admin/tokens", {"expires": expires}, expect=422)
        assert refused["field"] == "body.expires" and wrong in refused["detail"], refused
        assert refused["fix"]
    assert len(admin.get("/api/v1/users/admin/tokens")) == 1


def test_the_admin_token_of_the_first_start_stays_valid(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    (bootstrap,) = admin.get("/api/v1/users/admin/tokens")
    assert bootstrap["label"] == "bootstrap" and bootstrap["expires_at"] is None
    # The last valid admin token cannot be revoked: nobody could manage the server.
    locked = admin.http.delete(f"/api/v1/tokens/{bootstrap['id']}")
    assert locked.status_code == 409 and "phalanx token create admin" in locked.json()["fix"]
    short = admin.post("/api/v1/users/admin/tokens", {"label": "short", "expires": "1h"})
    assert admin.http.delete(f"/api/v1/tokens/{short['id']}").status_code == 204
    admin.user("alice")
    assert admin.get("/api/v1/users/me")["role"] == "admin"
    token_file = server.settings.data_dir / "admin.token"
    assert token_file.read_text().strip() == server.admin_token
