"""The Secret document: keys as text or base64, at least one, each once, 1 MiB at most;
every refusal names the field and says why, and no refusal or repr shows a value."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.domain.errors import DocumentError
from phalanx.spec.loader import build_document, load_documents
from phalanx.spec.secret import MAX_SECRET_BYTES, SecretDocument

VALUE = "hunter2-SECRET"


def secret(spec: Any) -> dict[str, Any]:
    return {"apiVersion": "phalanx/v1", "kind": "Secret", "metadata": {"name": "s3"}, "spec": spec}


def test_text_and_base64_values_are_bytes_by_key() -> None:
    pem = base64.b64encode(b"\x00\xff").decode()
    [document] = load_documents(
        f"""
apiVersion: phalanx/v1
kind: Secret
metadata: {{name: s3}}
spec:
  stringData: {{AWS_SECRET_ACCESS_KEY: {VALUE}, config.json: '{{"a": 1}}'}}
  data: {{tls.pem: {pem}, empty: ''}}
"""
    )
    assert isinstance(document, SecretDocument)
    assert document.values() == {
        "AWS_SECRET_ACCESS_KEY": VALUE.encode(),
        "config.json": b'{"a": 1}',
        "tls.pem": b"\x00\xff",
        "empty": b"",
    }
    assert document.spec.user == "default"  # the API sets the caller
    assert VALUE not in repr(document) and VALUE not in str(document)


BASE64_VALUE = base64.b64encode(VALUE.encode()).decode()

REFUSED = [
    # (spec, the field named, words of the reason)
    (VALUE, "spec", "expected a mapping"),
    ([VALUE], "spec", "expected a mapping"),
    ({"stringData": VALUE}, "spec.stringData", "expected a mapping"),
    ({"data": VALUE}, "spec.data", "expected a mapping"),
    ({"stringData": {"TOKEN": 31337}}, "spec.stringData.TOKEN", "expected text, got a number"),
    ({"stringData": {"TOKEN": [VALUE]}}, "spec.stringData.TOKEN", "expected text, got a list"),
    ({"stringData": {"TOKEN": {"x": VALUE}}}, "spec.stringData.TOKEN", "got a mapping"),
    ({"stringData": {"TOKEN": True}}, "spec.stringData.TOKEN", "got true or false"),
    ({"stringData": {"TOKEN": None}}, "spec.stringData.TOKEN", "got nothing"),
    ({"data": {"TOKEN": VALUE}}, "spec.data.TOKEN", "is not base64"),
    ({"data": {"TOKEN": BASE64_VALUE[:-1]}}, "spec.data.TOKEN", "is not base64"),
    ({"data": {"TOKEN": f" {BASE64_VALUE}"}}, "spec.data.TOKEN", "is not base64"),
    ({"data": {"TOKEN": "hünter2"}}, "spec.data.TOKEN", "is not base64"),
    ({"data": {"TOKEN": 31337}}, "spec.data.TOKEN", "is a number"),
    ({"stringData": {"bad key": VALUE}}, "spec.stringData['bad key']", "is not a valid key"),
    ({"stringData": {"..": VALUE}}, "spec.stringData['..']", "is not a valid key"),
    ({"stringData": {".": VALUE}}, "spec.stringData['.']", "is not a valid key"),
    ({"data": {"a/b": BASE64_VALUE}}, "spec.data.a/b", "is not a valid key"),
    ({"stringData": {"-x": VALUE}}, "spec.stringData['-x']", "is not a valid key"),
    ({"stringData": {"k" * 254: VALUE}}, "spec.stringData", "is not a valid key"),
    ({"stringData": {"A": VALUE}, "data": {"A": BASE64_VALUE}}, "spec.data.A", "in both"),
    ({}, "spec.stringData", "at least one key"),
    ({"stringData": {}, "data": {}}, "spec.stringData", "at least one key"),
    ({"stringData": {"A": "x" * (MAX_SECRET_BYTES + 1)}}, "spec", "over the limit of 1 MiB"),
    (
        {"stringData": {"A": "x" * MAX_SECRET_BYTES}, "data": {"B": "eA=="}},
        "spec",
        "over the limit of 1 MiB",
    ),
    ({"stringData": {f"K{i}": VALUE for i in range(1001)}}, "spec.stringData", "limit of 1000"),
    ({"stringdata": {"A": VALUE}}, "spec.stringdata", "did you mean 'stringData'"),
    ({"user": "bad user!", "stringData": {"A": VALUE}}, "spec.user", "not a valid user name"),
]


@pytest.mark.parametrize(("spec", "field", "reason"), REFUSED)
def test_a_refusal_names_the_field_and_never_the_value(spec: Any, field: str, reason: str) -> None:
    with pytest.raises(DocumentError) as refused:
        build_document(secret(spec))
    said = str(refused.value)
    assert refused.value.field is not None and refused.value.field.startswith(field), said
    assert reason in said and "fix: " in said
    for shown in (VALUE, BASE64_VALUE, "31337", "hünter2"):
        assert shown not in said


def test_pydantics_own_message_shows_no_value_either() -> None:
    with pytest.raises(ValidationError) as refused:
        SecretDocument.model_validate(
            secret({"stringData": {"A": 31337}, "data": {"B": VALUE}, "user": 12})
        )
    said = str(refused.value)
    assert "31337" not in said and VALUE not in said


def test_a_yaml_value_that_is_not_text_is_refused_without_echo() -> None:
    with pytest.raises(DocumentError) as refused:
        load_documents(
            "apiVersion: phalanx/v1\nkind: Secret\nmetadata: {name: s3}\n"
            "spec: {stringData: {PIN: 31337, DAY: 2024-01-02}}\n"
        )
    said = str(refused.value)
    assert "spec.stringData.PIN" in said and "31337" not in said


def test_the_size_counts_decoded_bytes() -> None:
    exactly = base64.b64encode(b"x" * MAX_SECRET_BYTES).decode()
    document = build_document(secret({"data": {"A": exactly}}))
    assert isinstance(document, SecretDocument)
    assert len(document.values()["A"]) == MAX_SECRET_BYTES
