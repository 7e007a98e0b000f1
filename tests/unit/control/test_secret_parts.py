"""A role's secrets at launch: env keys become variables, files keys files by NAME/KEY;
a secret gone, or a key that cannot be a variable, fails the start naming the secret
and the key, never a value; another user's secret is never read (the lookup is the
job's user's)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from phalanx.control.controllers.launches import secret_parts
from phalanx.domain.errors import InvalidInput

STORE = {
    ("alice", "s3"): {"AWS_ACCESS_KEY_ID": b"AKIA-alice", "AWS_SECRET_ACCESS_KEY": b"hunter2"},
    ("alice", "cert"): {"tls.pem": b"\x00binary"},
    ("bob", "s3"): {"AWS_ACCESS_KEY_ID": b"AKIA-bob"},
}
asked: list[tuple[str, str]] = []


def values(user: str, name: str) -> Mapping[str, bytes] | None:
    asked.append((user, name))
    return STORE.get((user, name))


def test_env_and_files_of_the_jobs_user() -> None:
    asked.clear()
    env, files = secret_parts("alice", (("s3", "env"), ("cert", "files")), values)
    assert env == {"AWS_ACCESS_KEY_ID": "AKIA-alice", "AWS_SECRET_ACCESS_KEY": "hunter2"}
    assert files == {"cert/tls.pem": b"\x00binary"}
    assert asked == [("alice", "s3"), ("alice", "cert")]  # never bob's


def test_a_secret_gone_or_unfit_as_env_fails_naming_it_but_no_value() -> None:
    with pytest.raises(InvalidInput) as gone:
        secret_parts("carol", (("s3", "env"),), values)
    assert "no secret 's3'" in str(gone.value)
    with pytest.raises(InvalidInput) as unfit:
        secret_parts("alice", (("cert", "env"),), values)
    said = str(unfit.value)
    assert "'tls.pem'" in said and "binary" not in said and "as: files" in said
    with pytest.raises(InvalidInput):
        secret_parts("alice", (("s3", "env"),), None)  # a server that holds no secrets
