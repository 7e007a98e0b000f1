"""Every control-plane integration test runs on SQLite and on PostgreSQL, except in a
module whose subject is not the store (a PyTorch job's rendezvous, a browser's drawing,
a container's stop), which names the one it runs on in ``BACKENDS`` with the reason:
running it twice would test the same thing twice.

PostgreSQL comes from ``PHALANX_TEST_POSTGRES`` (a server URL; ``.ci/run`` starts one from
Debian's packages). Without it the PostgreSQL runs are skipped with the reason, unless
``PHALANX_REQUIRE_POSTGRES=1`` (CI), where a missing server fails instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from phalanx.control.server import Server
from phalanx.control.store.database import Database
from phalanx.executors.cgroups import host_isolation
from phalanx.executors.taskgroups import TaskGroups, scope_of
from tests.integration.control import serving

#: The backends of a module that does not name its own in ``BACKENDS``.
BOTH = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each module's tests once per backend of its ``BACKENDS`` (default ``BOTH``)."""
    if "backend" in metafunc.fixturenames:
        backends = getattr(metafunc.module, "BACKENDS", BOTH)
        metafunc.parametrize("backend", backends, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The database of this module's servers; a fresh PostgreSQL database per module."""
    if request.param == "sqlite":
        serving.DATABASE.clear()
        yield "sqlite"
        return
    base = os.environ.get("PHALANX_TEST_POSTGRES")
    if not base:
        if os.environ.get("PHALANX_REQUIRE_POSTGRES") == "1":
            pytest.fail("PHALANX_TEST_POSTGRES is not set but PHALANX_REQUIRE_POSTGRES=1")
        pytest.skip("no PostgreSQL: set PHALANX_TEST_POSTGRES (bash .ci/postgres.sh starts one)")
    serving.DATABASE["base"] = base
    yield "postgresql"
    serving.DATABASE.clear()


#: Per server URL: the databases made for the running module, dropped after it.
_MADE: dict[str, list[str]] = {}


def create_database(base: str, *, template: str | None = None, keep: bool = False) -> str:
    """A new database on the server at ``base``, empty or a copy of database
    ``template`` (which nothing may be connected to); its URL. Dropped after the test
    module unless ``keep`` (the session's migrated template)."""
    name = f"phalanx_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    engine.dispose()
    if not keep:
        _MADE.setdefault(base, []).append(name)
    return make_url(base).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="module", autouse=True)
def databases_dropped() -> Iterator[None]:
    """After each test module, the PostgreSQL databases made for it go, connections and
    all (several hundred tests each leave one of several MB otherwise: gigabytes by the
    end of a CI run)."""
    yield
    for base, names in _MADE.items():
        engine = create_engine(base, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            for name in names:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()
    _MADE.clear()


#: Per server URL: a database this process migrated to the newest schema, copied for
#: each server (PostgreSQL copies a template in a fraction of the migrations' time).
_MIGRATED: dict[str, str] = {}


def create_migrated_database(base: str) -> str:
    """A new database on the server at ``base`` whose schema is the newest migration's,
    as a server's first start leaves it before it writes anything; its URL."""
    if base not in _MIGRATED:
        url = create_database(base, keep=True)
        Database.open(url).close()  # the migrations, and no connection left to it
        _MIGRATED[base] = make_url(url).database or ""
    return create_database(base, template=_MIGRATED[base])


@pytest.fixture(autouse=True)
def cgroups_left(tmp_path: Path) -> Iterator[None]:
    """After each test, the empty task groups its servers left on the host go (a server
    stopped or killed while its tasks ran cannot remove them when they end)."""
    yield
    groups = TaskGroups(host_isolation(), scope=scope_of(tmp_path / "data"))
    groups.collect(keep=())
    groups.release()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A started server on a loopback port the OS chose, over ``tmp_path/data`` and this
    module's database, with two 4-GPU nodes (``serving.CLUSTER``) and fast timing
    (``serving.FAST``: period 0.2 s, grace 1 s, backoff 0.2 s). ``server.url`` and
    ``server.admin_token`` reach it. Stopped, and its tasks killed, after the test."""
    with serving.running_server(tmp_path) as started:
        yield started


@pytest.fixture(scope="session")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``sim compare`` output folder (FIFO and Tiresias on a busy synthetic
    workload), made once for every test that shows a report: the replays would take most
    of those tests' time, and their output depends on no server."""
    from tests.integration.control.test_console_reports import compare_into

    scratch = tmp_path_factory.mktemp("compared")
    compare_into(scratch / "fifo-vs-tiresias", scratch)
    return scratch / "fifo-vs-tiresias"
