"""Fixtures shared by every test folder, and what must not run side by side."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

#: The public traces, read in place beside the repository (never copied into it).
TRACES_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "traces"

#: Tests that one worker runs in turn when pytest-xdist runs the suite (``-n``, as ``make
#: test`` and ``make test-fast`` do), by path prefix: a group's name, and why its tests
#: cannot be spread.
GROUPS: dict[str, str] = {
    # each module starts a Ray cluster on the fixed addresses 127.0.0.2-.5
    "tests/integration/ray/": "ray",
    # servers run as root give users uids from one range, each taking the lowest free:
    # two at once would give tenants of different servers the same uid
    "tests/integration/tenancy/": "uids",
    "tests/integration/control/test_user_identity.py": "uids",
    "tests/integration/executors/test_local_identity.py": "uids",
    "tests/integration/executors/test_local_containers_identity.py": "uids",
    # gangs of 300 and 600 tasks launched, killed and adopted again: two at once on two
    # cores would hold a restarted server past its start deadline
    "tests/integration/control/test_launch_interrupted.py": "big-gangs",
    # their tests share one server (a module fixture) and read what earlier ones left:
    # spread, each worker would start its own and see only its share of that
    "tests/integration/control/test_body_limit.py": "body-limit",
    "tests/integration/control/test_bad_input.py": "bad-input",
    # its checks share one simulation (a module fixture): spread, each worker would run it
    "tests/unit/sim/test_pollux_elastic.py": "pollux-elastic",
}


def group_of(nodeid: str) -> str | None:
    """The group of ``GROUPS`` a test belongs to, or None."""
    return next((g for prefix, g in GROUPS.items() if nodeid.startswith(prefix)), None)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, when it is installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n`` with ``--dist load`` (its default) or ``loadgroup``: xdist's loadgroup
    scheduler, grouping by ``GROUPS`` (xdist reads ``xdist_group`` marks from node ids,
    which pytest 9.2 no longer lets a plugin change: pytest-xdist issue 1386). Groups
    with the most tests go first."""
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Grouped(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return Grouped(config, log)


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """``../shared/traces``; skips the test when absent (fails with PHALANX_REQUIRE_TRACES=1)."""
    if TRACES_DIR.is_dir():
        return TRACES_DIR
    message = f"public traces not found at {TRACES_DIR}: clone with ../shared beside the repo"
    if os.environ.get("PHALANX_REQUIRE_TRACES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After the run, the skipped tests grouped by their reason, most first: each names
    the part that was missing and how to provide it (CI provides them all, and sets the
    ``PHALANX_REQUIRE_*`` variables so that a missing part fails instead)."""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if not reasons:
        return
    terminalreporter.write_sep("-", "skipped, by reason (bash .ci/run runs them all)")
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count:6d}  {reason}")
