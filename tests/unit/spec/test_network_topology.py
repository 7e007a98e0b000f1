"""``spec.networkTopology`` of a Job: conversion and every refusal, naming the field and fix."""

from __future__ import annotations

import textwrap

import pytest

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.domain.job import NetworkPlacement
from phalanx.spec import JobDocument, load_documents

JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: llm}
spec:
  networkTopology: %s
  roles:
  - name: worker
    replicas: 8
    resources: {cpu: 8, gpu: 8}
"""


def load(topology: str) -> JobDocument:
    (document,) = load_documents(textwrap.dedent(JOB % topology))
    assert isinstance(document, JobDocument)
    return document


def test_the_setting_converts_to_the_domain_value() -> None:
    job = load("{tier: tor, mode: soft, groupSize: 4}").to_domain()
    assert job.network == NetworkPlacement(tier="tor", mode="soft", group=4)


def test_mode_defaults_to_hard_and_the_group_to_the_whole_gang() -> None:
    assert load("{tier: spine}").to_domain().network == NetworkPlacement(tier="spine")


def test_a_job_without_the_setting_has_none() -> None:
    (document,) = load_documents(textwrap.dedent(JOB.replace("  networkTopology: %s\n", "")))
    assert isinstance(document, JobDocument)
    assert document.to_domain().network is None


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        (
            "{tier: ToR}",
            "spec.networkTopology.tier: 'ToR' is not a valid name (DNS-1123 label); "
            "fix: use lowercase letters",
        ),
        ("{tier: ''}", "spec.networkTopology.tier: '' is not a valid name"),
        ("{mode: hard}", "spec.networkTopology.tier: is required"),
        ("{tier: tor, groupSize: 0}", "spec.networkTopology.groupSize: must be >= 1"),
        ("{tier: tor, groupSize: '4'}", "spec.networkTopology.groupSize: expected an integer"),
        (
            "{tier: tor, groupSize: 9}",
            "spec.networkTopology.groupSize: a group of 9 tasks is more than the job's 8 "
            "replicas; fix: set groupSize between 1 and 8",
        ),
        (
            "{tier: tor, mode: strict}",
            "spec.networkTopology.mode: 'strict' is not allowed; fix: use one of 'hard' or 'soft'",
        ),
        (
            "{tier: tor, group: 4}",
            "spec.networkTopology.group: unknown field; fix: did you mean 'groupSize'?",
        ),
        (
            "{tier: tor, highestTier: spine}",
            "spec.networkTopology.highestTier: unknown field; fix: allowed: tier, mode, groupSize",
        ),
        ("tor", "spec.networkTopology: expected"),
    ],
)
def test_bad_settings_are_refused_with_the_field_and_the_fix(topology: str, message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        load(topology)
    assert message in str(caught.value)


def test_the_domain_value_refuses_an_empty_tier_and_a_group_below_one() -> None:
    with pytest.raises(InvalidInput, match="tier: the network tier is empty"):
        NetworkPlacement(tier="")
    with pytest.raises(InvalidInput, match="group: group size 0 is below 1; fix: give a group"):
        NetworkPlacement(tier="tor", group=0)
