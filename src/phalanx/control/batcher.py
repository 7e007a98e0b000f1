"""Group commit for submissions: many requests, one writer, one transaction.

Each accepted submission waits until the transaction holding it has committed, so an
answer of 201 always means the job is stored. Submissions that arrive together share a
transaction, in which their queues are found and checked with one query (two when some
job names no queue: its user's default queue is read) and their rows inserted with two
statements: under load the cost of a commit (and of handing the database
between threads) is paid once per batch instead of once per job. A submission that fails
its check, or whose name is taken, is answered with its own error; the rest of its batch
is stored all the same.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from phalanx.control.auth import Principal
from phalanx.control.dataset_uses import check_datasets
from phalanx.control.errors import ApiError
from phalanx.control.secret_uses import check_secrets
from phalanx.control.store import DataError, IntegrityError
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.database import Database
from phalanx.control.submit import check_models, name_taken, resolve_queues, store_jobs
from phalanx.control.waiting_limits import check_waiting
from phalanx.domain.job import Job
from phalanx.spec.job import JobDocument
from phalanx.wire.views import JobView

log = logging.getLogger(__name__)

_Item = tuple[JobDocument, Principal, "Future[JobView]"]


class SubmissionWriter:
    """Writes submitted jobs in batches of up to ``max_batch`` on its own thread."""

    def __init__(
        self,
        db: Database,
        *,
        max_batch: int = 256,
        on_stored: Callable[[Sequence[tuple[int, Job]]], None] | None = None,
    ) -> None:
        """``on_stored`` hears each committed batch's (row id, job), before the submitters
        are answered (the controller takes them without reading them back)."""
        self._db = db
        self._max_batch = max_batch
        self._on_stored = on_stored
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="phalanx-submissions", daemon=True)
        self._thread.start()

    def enqueue(self, document: JobDocument, submitter: Principal) -> Future[JobView]:
        """Queue one job for storing; the future ends with its view once it is committed,
        or with the ``ApiError`` to answer (unknown or closed queue, name taken)."""
        future: Future[JobView] = Future()
        self._queue.put((document, submitter, future))
        return future

    async def submit(self, document: JobDocument, submitter: Principal) -> JobView:
        """Store one job and wait for the commit without holding a thread."""
        return await asyncio.wrap_future(self.enqueue(document, submitter))

    def close(self) -> None:
        """Finish what was queued, then stop the writer thread."""
        self._queue.put(None)
        self._thread.join(10)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(item)
            self._write(batch)

    def _write(self, batch: list[_Item]) -> None:
        try:
            with self._db.write() as session:
                resolved = check_waiting(
                    session,
                    check_datasets(
                        session,
                        check_secrets(
                            session,
                            check_models(
                                session,
                                resolve_queues(session, [(d, who) for d, who, _ in batch]),
                            ),
                        ),
                    ),
                )
                accepted = [
                    (document, future)
                    for (_, _, future), document in zip(batch, resolved, strict=True)
                    if isinstance(document, JobDocument)
                ]
                stored = store_jobs(session, [document for document, _ in accepted])
        except (IntegrityError, DataError) as error:
            if len(batch) > 1:  # find the one at fault: each alone
                for item in batch:
                    self._write([item])
            elif isinstance(error, IntegrityError):
                document, submitter, future = batch[0]
                name = document.metadata.name
                future.set_exception(name_taken(name, submitter, self._owner_of(name)))
            else:  # the database refused one of its values: the submitter hears why
                batch[0][2].set_exception(error)
            return
        except Exception as error:  # the database failed: every waiting request hears it
            log.exception("storing %d submitted jobs failed", len(batch))
            for _, _, future in batch:
                future.set_exception(error)
            return
        for (_, _, future), refusal in zip(batch, resolved, strict=True):
            if isinstance(refusal, ApiError):
                future.set_exception(refusal)
        if self._on_stored is not None and stored:
            try:
                self._on_stored([(job.id, job.job) for job in stored])
            except Exception:  # only a shortcut: the rows are committed and will be read
                log.exception("handing %d stored jobs over failed", len(stored))
        for (_, future), job in zip(accepted, stored, strict=True):
            future.set_result(job.view)

    def _owner_of(self, name: str) -> str | None:
        """Whose job is named ``name``; None when that cannot be read (the answer then
        does not name the submitter's own job as such)."""
        try:
            with self._db.session() as session:
                return stored_jobs.owner(session, name)
        except Exception:
            log.exception("reading the owner of job %s failed", name)
            return None
