"""Content hashes of what runs' steps wrote, computed off the workflow controller.

Hashing an artifact reads a path a tenant controls: up to ``contents.HASH_LIMITS``, a
minute or more of reading. The workflow controller plans every run on one thread and
inside a write transaction, so it never hashes itself: it asks ``Hashes.batch`` for
every hash one decision needs, which answers at once, with the digests when workers
have them all, or ``NotYetHashed`` after queueing what is missing; a worker calls
``on_done`` (the controller's ``poke``) when it has an answer, and the controller asks
again on its next tick.

Guarantees: ``batch`` never reads a file and never waits; answers are kept per asker
(a unit's attempt and purpose) and handed over all at once, then forgotten, so no
asker is ever given a digest computed for another (content may change in between);
an asker is given either every digest or, when a hash failed, its error
(``MissingContent``, ``TenantPathRefused``, ``OSError``); answers nobody collects are
dropped after ``KEEP_SECONDS``; workers are daemon threads, started with the first hash
asked, so a controller that never hashes starts none, and a hash under way never
delays the server's exit.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from phalanx.domain.errors import PhalanxError
from phalanx.workflow.contents import Access, content_hash

log = logging.getLogger(__name__)

#: Threads hashing at once.
WORKERS: Final = 2
#: How long an answer nobody asked for again is kept.
KEEP_SECONDS: Final = 600.0


class NotYetHashed(PhalanxError):
    """The content hash is being computed: ask again once ``on_done`` was called."""


@dataclass(frozen=True, slots=True)
class _Answer:
    digest: str | None
    error: Exception | None
    at: float


_Key = tuple[str, str, Access]  # asker, URL, how it is read


class Hashes:
    """Content hashes computed by worker threads (see the module)."""

    def __init__(
        self,
        on_done: Callable[[], None],
        *,
        workers: int = WORKERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_done = on_done
        self._clock = clock
        self._lock = threading.Lock()
        self._asked: set[_Key] = set()
        self._answers: dict[_Key, _Answer] = {}
        self._work: queue.SimpleQueue[_Key | None] = queue.SimpleQueue()
        self._workers = workers
        self._threads: list[threading.Thread] = []  # started with the first hash asked

    def batch(self, asker: str, urls: Sequence[str], access: Access) -> dict[str, str]:
        """The content hash of each of ``urls`` read with ``access``, for ``asker``;
        ``NotYetHashed`` while one is computed (none is handed over then); the error of
        the first hash of them that failed."""
        keys = [(asker, url, access) for url in dict.fromkeys(urls)]
        with self._lock:
            self._forget_stale()
            missing = [key for key in keys if key not in self._answers]
            for key in missing:
                if key not in self._asked:
                    self._asked.add(key)
                    self._work.put(key)
            if missing and not self._threads:
                self._start_workers()
            if missing:
                raise NotYetHashed(f"{len(missing)} of {len(keys)} contents are being hashed")
            answers = [self._answers.pop(key) for key in keys]
        for answer in answers:
            if answer.error is not None:
                raise answer.error
        return {key[1]: str(answer.digest) for key, answer in zip(keys, answers, strict=True)}

    def close(self) -> None:
        """Stop the workers once each has finished the hash it is on (not waited for)."""
        with self._lock:
            for _ in self._threads:
                self._work.put(None)
            self._threads = []

    def _start_workers(self) -> None:
        self._threads = [
            threading.Thread(target=self._serve, name=f"phalanx-hashes-{n}", daemon=True)
            for n in range(self._workers)
        ]
        for thread in self._threads:
            thread.start()

    def _forget_stale(self) -> None:
        cutoff = self._clock() - KEEP_SECONDS
        for key in [k for k, a in self._answers.items() if a.at < cutoff]:
            del self._answers[key]

    def _serve(self) -> None:
        while (key := self._work.get()) is not None:
            digest: str | None = None
            error: Exception | None = None
            try:
                digest = content_hash(key[1], key[2])
            except (PhalanxError, OSError, ValueError) as caught:
                error = caught
            except Exception as caught:  # a bug: the step is not cached, and it is logged
                log.exception("hashing %s failed", key[1])
                error = caught
            with self._lock:
                self._asked.discard(key)
                self._answers[key] = _Answer(digest=digest, error=error, at=self._clock())
            self._on_done()
