"""Secrets through the real server (issue 39): created by the API, by ``phalanx secret
create`` and by ``phalanx apply``; every answer and every line of the CLI shows key
names and sizes, never a value; the database holds them sealed; a secret is its user's
(another user gets 404 and does not see it listed; an admin lists everyone's and
reaches one as ``?user=``); a refused body never echoes a value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phalanx.client import Client
from phalanx.control.server import Server
from tests.integration.control.serving import Api
from tests.integration.control.test_cli import ok, phalanx, refused

VALUE = "hunter2-SECRET"
OTHER = "correct-horse-battery"


def document(name: str, user: str | None = None, **keys: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"stringData": keys}
    if user is not None:
        spec["user"] = user
    return {"apiVersion": "phalanx/v1", "kind": "Secret", "metadata": {"name": name}, "spec": spec}


def shows_no_value(*answers: Any) -> None:
    for answer in answers:
        text = answer if isinstance(answer, str) else repr(answer)
        assert VALUE not in text and OTHER not in text, text


def stored_bytes(server: Server) -> bytes:
    """Every byte of the SQLite database and its write-ahead log."""
    data = server.settings.data_dir
    return b"".join(
        path.read_bytes()
        for path in (data / "phalanx.db", data / "phalanx.db-wal")
        if path.exists()
    )


def test_a_users_secret_is_theirs_and_never_shown_back(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    alice, bob = admin.user("alice"), admin.user("bob")

    made = alice.post("/api/v1/secrets", document("s3", AWS_SECRET_ACCESS_KEY=VALUE, ID="AKIA"))
    assert (made["name"], made["user"], made["keys"]) == (
        "s3",
        "alice",
        ["AWS_SECRET_ACCESS_KEY", "ID"],
    )
    assert made["size"] == len(VALUE) + 4 and made["created_at"] == made["updated_at"]
    again = alice.http.post("/api/v1/secrets", json=document("s3", A=VALUE))
    assert again.status_code == 409 and "PUT" in again.json()["fix"]

    replaced = alice.http.put("/api/v1/secrets/s3", json=document("s3", TOKEN=OTHER))
    assert replaced.status_code == 200, replaced.text
    assert (
        replaced.json()["keys"] == ["TOKEN"] and replaced.json()["updated_at"] > made["created_at"]
    )
    # bob's s3 is another secret; an admin may make one for another user
    bobs = bob.post("/api/v1/secrets", document("s3", user="alice", PASSWORD=VALUE))
    assert bobs["user"] == "bob"  # a user's secrets are always their own
    carols = admin.post("/api/v1/secrets", document("db", user="carol", PASSWORD=VALUE))
    assert carols["user"] == "carol"

    listed = alice.get("/api/v1/secrets")
    assert [(s["user"], s["name"]) for s in listed] == [("alice", "s3")]
    assert alice.get("/api/v1/secrets/s3")["keys"] == ["TOKEN"]
    everyone = admin.get("/api/v1/secrets")
    assert [(s["user"], s["name"]) for s in everyone] == [
        ("alice", "s3"),
        ("bob", "s3"),
        ("carol", "db"),
    ]
    assert admin.get("/api/v1/secrets/s3", user="bob")["keys"] == ["PASSWORD"]
    assert alice.get("/api/v1/secrets/db", expect=404)["fix"]
    assert alice.get("/api/v1/secrets/db", expect=404, user="carol")
    assert bob.get("/api/v1/secrets/s3", expect=404, user="alice")
    shows_no_value(made, again.text, replaced.text, bobs, carols, listed, everyone)

    if server.settings.db_url is None:  # SQLite in the data dir: read it as a thief would
        stored = stored_bytes(server)
        assert b"AWS_SECRET_ACCESS_KEY" in stored or b"TOKEN" in stored  # names in clear
        assert VALUE.encode() not in stored and OTHER.encode() not in stored

    assert bob.http.delete("/api/v1/secrets/s3", params={"user": "alice"}).status_code == 404
    assert alice.http.delete("/api/v1/secrets/s3").status_code == 204
    assert alice.get("/api/v1/secrets/s3", expect=404)
    assert alice.http.delete("/api/v1/secrets/s3").status_code == 404
    assert bob.get("/api/v1/secrets/s3")["user"] == "bob"  # bob's is still there
    assert admin.http.delete("/api/v1/secrets/db", params={"user": "carol"}).status_code == 204


def test_a_refused_body_never_echoes_a_value(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    admin.post("/api/v1/secrets", document("s3", A="x"), expect=201)
    bodies = [
        document("s3", **{"bad key": VALUE}),
        {**document("s3"), "spec": {"stringData": {"PIN": 31337, "A": VALUE}}},
        {**document("s3"), "spec": {"data": {"A": VALUE}}},
        {**document("s3"), "spec": VALUE},
        {**document("s3"), "spec": {"stringData": VALUE}},
        {**document("s3"), "spec": {"stringData": {"A": VALUE}, "data": {"A": "eA=="}}},
        {**document("s3", A=VALUE), "extra": VALUE},
        [document("s3", A=VALUE)],
    ]
    for body in bodies:
        for method, path in (("PUT", "/api/v1/secrets/s3"), ("POST", "/api/v1/secrets")):
            answer = admin.http.request(method, path, json=body)
            assert answer.status_code == 422, answer.text
            assert "hunter2" not in answer.text and "31337" not in answer.text, answer.text
            assert answer.json()["field"]
    named = admin.http.put("/api/v1/secrets/s3", json=document("s3", **{"bad key": VALUE}))
    assert named.json()["field"] == "spec.stringData['bad key']"
    assert admin.http.put("/api/v1/secrets/s3", json=document("other", A=VALUE)).status_code == 422
    assert admin.http.put("/api/v1/secrets/none", json=document("none", A=VALUE)).status_code == 404
    # sent to another kind's endpoint: refused by its kind, the value not echoed either
    wrong = admin.http.post("/api/v1/jobs", json=document("s3", A=VALUE))
    assert wrong.status_code == 422 and "hunter2" not in wrong.text


def test_the_cli_and_apply_create_list_describe_and_delete_without_a_value(
    server: Server, tmp_path: Path
) -> None:
    admin = Api(server.url, server.admin_token or "")
    alice = admin.user("alice")
    key_file = tmp_path / "id_rsa"
    key_file.write_bytes(b"\x00\x01" + OTHER.encode())
    made = phalanx(
        server,
        "secret", "create", "s3",
        "--from-literal", f"AWS_SECRET_ACCESS_KEY={VALUE}",
        "--from-literal", "EMPTY=",
        "--from-file", f"ssh={key_file}",
        "--from-file", str(key_file),
        token=alice.token,
    )  # fmt: skip
    assert ok(made) == "secret/s3 created\n"
    taken = refused(
        phalanx(server, "secret", "create", "s3", "--from-literal", f"A={VALUE}", token=alice.token)
    )
    assert "--replace" in taken
    replaced = phalanx(
        server,
        "secret",
        "create",
        "s3",
        "--from-literal",
        f"A={VALUE}",
        "--replace",
        token=alice.token,
    )
    assert ok(replaced) == "secret/s3 configured\n"
    fresh = phalanx(
        server,
        "secret",
        "create",
        "gcs",
        "--from-literal",
        f"A={VALUE}",
        "--replace",
        token=alice.token,
    )
    assert ok(fresh) == "secret/gcs created\n"
    bad = [
        ("--from-literal", VALUE),  # no '=': the argument may be the value itself
        ("--from-literal", f"bad key={VALUE}"),
        ("--from-literal", f"=={VALUE}"),
        ("--from-file", f"A={tmp_path / 'missing'}"),
    ]
    for option, argument in bad:
        said = refused(
            phalanx(server, "secret", "create", "x", option, argument, token=alice.token)
        )
        assert "hunter2" not in said, said
    assert "at least one key" in refused(
        phalanx(server, "secret", "create", "x", token=alice.token)
    )

    manifest = tmp_path / "secret.yaml"
    manifest.write_text(
        f"apiVersion: phalanx/v1\nkind: Secret\nmetadata: {{name: db}}\n"
        f"spec: {{stringData: {{PASSWORD: {VALUE}}}}}\n"
    )
    assert (
        ok(phalanx(server, "apply", "-f", str(manifest), token=alice.token))
        == "secret/db created\n"
    )
    assert (
        ok(phalanx(server, "apply", "-f", str(manifest), token=alice.token))
        == "secret/db configured\n"
    )
    manifest.write_text(manifest.read_text().replace("PASSWORD", "bad key"))
    shows_no_value(refused(phalanx(server, "apply", "-f", str(manifest), token=alice.token)))

    shown = [
        ok(phalanx(server, "get", "secrets", token=alice.token)),
        ok(phalanx(server, "get", "secrets", "-o", "json", token=alice.token)),
        ok(phalanx(server, "get", "secret", "s3", "-o", "yaml", token=alice.token)),
        ok(phalanx(server, "describe", "secret", "db", token=alice.token)),
        ok(phalanx(server, "get", "secrets")),  # the admin: everyone's
        ok(phalanx(server, "describe", "secret", "db", "--user", "alice")),
    ]
    shows_no_value(*shown)
    assert shown[0].splitlines()[0].split() == ["NAME", "KEYS", "SIZE", "USER", "AGE"]
    assert "db" in shown[0] and "gcs" in shown[0] and "alice" in shown[4]
    assert "PASSWORD" in shown[3] and "never shown" in shown[3]
    assert "no secrets" in phalanx(server, "get", "secrets", token=admin.user("bob").token).stderr

    assert ok(phalanx(server, "delete", "secret", "db", "gcs", token=alice.token)) == (
        "secret/db deleted\nsecret/gcs deleted\n"
    )
    assert "no secret named 'db'" in refused(
        phalanx(server, "describe", "secret", "db", token=alice.token)
    )
    assert ok(phalanx(server, "delete", "secret", "s3", "--user", "alice")) == "secret/s3 deleted\n"


def test_the_sdk_puts_text_and_bytes(server: Server) -> None:
    with Client(server.url, server.admin_token) as client:
        view = client.put_secret("tls", {"cert.pem": b"\x00\xff", "NOTE": VALUE})
        assert (view.keys, view.size, view.user) == (["NOTE", "cert.pem"], 2 + len(VALUE), "admin")
        again = client.put_secret("tls", {"NOTE": OTHER})
        assert again.keys == ["NOTE"] and again.created_at == view.created_at
        assert [s.name for s in client.secrets()] == ["tls"]
        assert client.secret("tls").size == len(OTHER)
        client.delete_secret("tls")
        assert client.secrets() == []
