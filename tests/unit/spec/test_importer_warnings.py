"""The Volcano and OpenPAI importers' warnings reach ``warn`` under the document's
header, one line per field read but not honoured."""

from __future__ import annotations

import yaml

from phalanx.spec import load_documents
from tests.unit.spec.test_openpai_notices import EXPECTED
from tests.unit.spec.test_openpai_notices import unhonoured as openpai_unhonoured
from tests.unit.spec.test_volcano_notices import FIELDS, unhonoured


def test_each_vcjob_notice_is_a_warning_line() -> None:
    warnings: list[str] = []
    load_documents(yaml.safe_dump(unhonoured()), source="vcjob.yaml", warn=warnings.append)
    header = "vcjob.yaml document 1 (Job mpi): "
    assert all(line.startswith(header) for line in warnings)
    paths = [line.removeprefix(header).partition(": ")[0] for line in warnings]
    assert sorted(paths) == sorted(FIELDS)


def test_each_openpai_notice_is_a_warning_line() -> None:
    warnings: list[str] = []
    text = yaml.safe_dump(openpai_unhonoured())
    load_documents(text, source="pai.yaml", warn=warnings.append)
    header = "pai.yaml document 1 (OpenPAI job small_job): "
    assert all(line.startswith(header) for line in warnings)
    paths = [line.removeprefix(header).partition(": ")[0] for line in warnings]
    assert sorted(paths) == sorted(EXPECTED)
