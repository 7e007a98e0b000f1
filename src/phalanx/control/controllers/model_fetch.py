"""The model fetcher: the model versions a job's tasks read are made ready before the
job is scheduled.

Guarantees:
- a job whose roles read a model version (``modelVersion``, pinned at submit to its
  digest; ``model_fetch = pending``) is not taken in by the scheduler until ``copies``
  has each version: on the server's host, copied into the model cache
  (``phalanx.models.cache``), whole and verified against its digest; on a Ray cluster
  (``executors.ray.models``), its manifest verified in the store, each node's agent
  copying it out just before a start there. Then its fetch is ``done`` and the
  controller is woken to take it in;
- a job whose roles read datasets is made ready the same way (``data_inputs``: each
  pinned to its listing in the job's stored document, copied into the host's dataset
  cache, or on a Ray cluster by each task's node just before its start); one whose
  dataset was never listed waits, skipped until datasets are listed (``listed``); the
  listings no dataset and no job not yet ended names are forgotten;
- what cannot be made ready (a version whose files are gone or corrupt, a store that
  cannot be read, a dataset that cannot be copied) marks the fetch ``failed`` with an
  event naming the version or dataset and the reason; the controller then fails the
  job;
- versions no version row keeps any more leave the copies within a pass of their
  deletion (a version some live job reads cannot be deleted: ``api.models``), or the
  first pass after that in which every copy could be collected.
The copy runs on this controller's own thread, never on the scheduler's tick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol

from phalanx.control.controllers.data_inputs import DatasetInputs
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.store import datasets as stored_datasets
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import model_versions as stored
from phalanx.control.store.database import Database
from phalanx.control.store.models import JobRow
from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.models.store import ModelStore
from phalanx.spec.job import JobDocument
from phalanx.spec.model import ModelRef, model_reference

log = logging.getLogger(__name__)

#: Jobs fetched for per pass.
BATCH: Final = 8


class Copies(Protocol):
    """Where the versions tasks read are copied out: ``models.cache.ModelCache`` on the
    server's host, ``executors.ray.models.NodeModels`` on a Ray cluster's nodes."""

    def ensure(self, store: ModelStore, digest: str) -> object:
        """Make version ``digest`` of ``store`` ready for its tasks; raises
        ``InvalidInput``, ``ContentError`` or ``OSError`` when it cannot be."""
        ...

    def collect(self, keep: Iterable[str]) -> int | None:
        """Remove the copies of versions not in ``keep``: how many went (None: not all
        could be collected now; asked again next pass)."""
        ...


class ModelFetcher:
    """See the module docstring. ``start``/``stop`` its thread; ``poke`` when jobs that
    read models were stored or versions deleted; ``on_ready`` is called (from this
    thread) after fetches were settled, for the controller to take the jobs in."""

    def __init__(
        self,
        db: Database,
        store: ModelStore,
        copies: Copies,
        *,
        on_ready: Callable[[], None],
        datasets: DatasetInputs | None = None,
        period: float = 5.0,
    ) -> None:
        self.db, self.store, self.copies = db, store, copies
        self.datasets = datasets
        self._waiting: set[int] = set()  # jobs whose datasets wait for a first listing
        self._relisted = threading.Event()  # set by ``listed``: look at those jobs again
        self._on_ready = on_ready
        self._period = period
        self._kept: set[str] | None = None  # what the cache was last collected down to
        self._listings_kept: set[str] | None = None  # pinned digests at the last collection
        self._ticker = Ticker("phalanx-model-fetch", self.tick)

    def start(self) -> None:
        """Start fetching on a thread of its own."""
        self._ticker.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the copy under way; False when it still ran after ``timeout``."""
        return self._ticker.stop(timeout)

    def poke(self) -> None:
        """Look for jobs waiting on a model, and for deleted versions, soon."""
        self._ticker.poke()

    def listed(self) -> None:
        """Datasets were listed: the jobs that waited for them are looked at again soon
        (thread-safe: the next pass, on this fetcher's thread, forgets which waited)."""
        self._relisted.set()
        self._ticker.poke()

    def tick(self) -> float:
        """One pass: copy out what jobs wait for, then collect; seconds until the next."""
        owed: Sequence[JobRow] = ()
        relisted = self._relisted.is_set()
        if relisted:  # cleared before the reads: a later listing sets it again
            self._relisted.clear()
            self._waiting.clear()
        try:
            with self.db.session() as session:
                owed = stored.fetches_owed(session, BATCH, skip=self._waiting)
                jobs = [(row.id, row.user, row.document) for row in owed]
                readers = [document for _, document in stored.readers(session)]
            if self.datasets is not None:  # before the copies: what ended makes room
                pinned = self.datasets.keep(readers)
                if relisted or pinned != self._listings_kept:
                    with self.db.write() as session:
                        stored_datasets.collect_listings(session, pinned)
                    self._listings_kept = pinned
            for job_id, user, document in jobs:
                self._fetch(job_id, user, document)
            if jobs:
                self._on_ready()
            with self.db.session() as session:
                kept = stored.kept_digests(session)
            if kept != self._kept:
                removed = self.copies.collect(kept)
                self._kept = None if removed is None else kept
                if removed:
                    log.info("model cache: removed %d versions no longer kept", removed)
        except Exception:  # a store or database outage: try again next pass
            log.exception("model fetch pass failed; trying again")
        return 0.0 if len(owed) == BATCH else self._period

    def _fetch(self, job_id: int, user: str, document: dict[str, Any]) -> None:
        """Make ready each version and dataset job ``job_id`` reads; record the outcome
        with events, and the datasets' pins in its document. A job whose dataset was
        never listed yet is left pending (looked at again once datasets are listed)."""
        spec = JobDocument.model_validate(document).spec
        refs = [
            (name, digest or None)
            for role in spec.roles
            for name, _, digest in (ref.partition("@") for ref in role.datasets)
        ]
        events: list[tuple[str, str]] = []
        pins: dict[str, str] = {}
        if refs:
            if self.datasets is None:
                events.append(("DatasetNotReady", "this server reads no datasets"))
            else:
                with self.db.session() as session:
                    read = self.datasets.read(session, user, refs)
                if read is None:
                    self._waiting.add(job_id)
                    return
                listed, refused = read
                pins, copied = self.datasets.copy(user, listed)
                events += [("DatasetNotReady", line) for line in [*refused, *copied]]
                where = (
                    ""
                    if self.datasets.cache is not None
                    else "; each task's node copies it as it starts"
                )
                events += [
                    (
                        "DatasetReady",
                        f"{d.name} ({d.digest}, {len(d.files)} files, {d.size} bytes{where})",
                    )
                    for d in (dataset.copy for dataset in listed)
                    if d.name in pins
                ]
        wanted = [model_reference(r.model_version) for r in spec.roles if r.model_version]
        for ref in dict.fromkeys(wanted):
            why = self._copy_out(ref)
            line = f"{ref.name}:v{ref.version} ({ref.digest})" + ("" if why is None else f": {why}")
            events.append(("ModelReady" if why is None else "ModelNotReady", line))
        failed = any(kind.endswith("NotReady") for kind, _ in events)
        if self._ticker.stopping:  # the database closes after this pass: owed still
            return
        now = time.time()
        with self.db.write() as session:
            for kind, line in events:
                stored_jobs.add_event(session, job_id, time=now, kind=kind, message=line)
            if pins and not failed:
                stored_jobs.set_document(session, job_id, _pinned(document, pins))
            stored.settle_fetch(session, job_id, stored.FAILED if failed else stored.DONE)

    def _copy_out(self, ref: ModelRef) -> str | None:
        """Why version ``ref`` cannot be copied out for its tasks (None: it is there)."""
        if ref.digest is None:  # pinned at submit: a document stored otherwise is refused
            return "the version is not pinned to a digest; fix: submit the job again"
        try:
            self.copies.ensure(self.store, ref.digest)
        except (InvalidInput, ContentError) as error:
            return str(error)
        except OSError as error:
            return f"it could not be copied out: {error}"
        return None


def _pinned(document: dict[str, Any], pins: dict[str, str]) -> dict[str, Any]:
    """``document`` with each role's datasets pinned to ``pins`` (``NAME@sha256:...``)."""
    spec = dict(document["spec"])
    spec["roles"] = [
        {
            **role,
            "datasets": [
                f"{name}@{pins[name]}" if name in pins else reference
                for reference in role.get("datasets", [])
                for name in [str(reference).partition("@")[0]]
            ],
        }
        if role.get("datasets")
        else role
        for role in spec["roles"]
    ]
    return {**document, "spec": spec}
