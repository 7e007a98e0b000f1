"""The dataset lister: each dataset's source is listed when it is created or changed, and
when someone asks (``phalanx dataset refresh``).

Guarantees:
- a dataset whose listing is owed (``DatasetRow.wanted`` above ``listed``) is listed on
  this controller's own thread, never in a request: its source is read with its own
  secret alone (``data.source.reach``), and its files, sizes and versions, their
  count, total and digest are recorded in one transaction, Ready; or why it could not
  be, Failed, keeping the last good listing (which jobs then read). A secret's values
  never appear in what is recorded (each is masked);
- a listing taken while the document changed again is not recorded (the newer one is
  owed and taken next);
- a dataset with ``spec.refreshEvery`` is owed a listing once that long has passed since
  its last one;
- after a pass that recorded something, ``on_listed`` is called (from this thread),
  for the jobs that waited on a first listing to be looked at again;
- once ``stop`` was called nothing more is written (the server closes the database
  after it): a listing cut short is owed still, and taken at the next start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from phalanx.control.controllers.data_inputs import SecretValues
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.store import datasets as stored
from phalanx.control.store.database import Database
from phalanx.data.copies import masked
from phalanx.data.source import Listing, list_source, reach
from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.spec.dataset import DatasetDocument

log = logging.getLogger(__name__)

#: Datasets listed per pass.
BATCH: Final = 8


class DatasetLister:
    """See the module docstring. ``start``/``stop`` its thread; ``poke`` when a dataset
    was created, changed or asked to be listed again."""

    def __init__(
        self,
        db: Database,
        secret_values: SecretValues,
        *,
        on_listed: Callable[[], None] = lambda: None,
        period: float = 5.0,
    ) -> None:
        self.db = db
        self._secret_values = secret_values
        self._on_listed = on_listed
        self._period = period
        self._ticker = Ticker("phalanx-datasets", self.tick)

    def start(self) -> None:
        """Start listing on a thread of its own."""
        self._ticker.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the listing under way; False when it still ran after ``timeout``."""
        return self._ticker.stop(timeout)

    def poke(self) -> None:
        """Look for datasets to list soon."""
        self._ticker.poke()

    def tick(self) -> float:
        """One pass: list what is owed; seconds until the next."""
        owed = 0
        try:
            with self.db.session() as session:
                due = stored.refresh_due(session, time.time())
            if due:
                with self.db.write() as session:
                    for user, name in due:
                        stored.relist(session, user, name)
            with self.db.session() as session:
                rows = stored.owed(session, BATCH)
                todo = [(row.user, row.name, row.wanted, row.document) for row in rows]
            owed = len(todo)
            for user, name, asked, document in todo:
                if self._ticker.stopping:  # the database closes after this pass
                    return 0.0
                self._list(user, name, asked, document)
            if todo:
                self._on_listed()
        except Exception:  # a database outage: try again next pass
            log.exception("dataset listing pass failed; trying again")
        return 0.0 if owed == BATCH else self._period

    def _list(self, user: str, name: str, asked: int, document: dict[str, object]) -> None:
        """List ``user``'s dataset ``name`` for its ``asked`` change; record the outcome."""
        spec = DatasetDocument.model_validate(document).spec
        values = None
        found: Listing | None = None
        problem = ""
        if spec.secret is not None:
            values = self._secret_values(user, spec.secret)
        if spec.secret is not None and values is None:
            problem = f"its secret {spec.secret!r} was deleted; fix: create it again"
        else:
            try:
                fs, root = reach(spec.url, values)
                found = list_source(fs, root, source=spec.url)
            except (InvalidInput, ContentError) as error:
                problem = str(error)
            except Exception as error:  # the store's own errors (s3fs, botocore, a network)
                problem = f"the source could not be listed: {error}"
        now = time.time()
        if self._ticker.stopping:  # stopped meanwhile: the listing is owed to the next start
            return
        with self.db.write() as session:
            if found is not None:
                stored.record_listing(
                    session,
                    user,
                    name,
                    asked=asked,
                    files=found.files,
                    digest=found.digest,
                    now=now,
                )
            else:
                stored.record_failure(
                    session, user, name, asked=asked, message=masked(problem, values), now=now
                )
