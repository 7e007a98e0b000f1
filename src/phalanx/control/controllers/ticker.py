"""The thread a controller ticks on: ``Ticker``.

Guarantees: one daemon thread runs ``tick`` again and again until ``stop``. After each
tick it waits for as many seconds as the tick returned, or less when ``poke`` is
called meanwhile (from any thread; pokes during a tick end the wait at once); then
``pace``, when given, may rest it longer (a rest that ``stop`` cuts short and pokes do
not). An exception from ``tick`` is the tick's to handle: one that escapes ends the
thread, so callers catch what they can survive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Ticker:
    """See the module docstring. ``name`` names the thread."""

    def __init__(
        self,
        name: str,
        tick: Callable[[], float],
        *,
        pace: Callable[[], float] | None = None,
    ) -> None:
        self._name = name
        self._tick = tick
        self._pace = pace
        self._poked = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called."""
        return self._stopping.is_set()

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Ask for the next tick as soon as possible (thread-safe)."""
        self._poked.set()

    def stop(self, timeout: float) -> bool:
        """Stop once the tick under way is done; False if it still ran after ``timeout``."""
        self._stopping.set()
        self._poked.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while not self._stopping.is_set():
            wait = self._tick()
            self._poked.wait(max(0.0, wait))
            if self._pace is not None:
                rest = self._pace()
                if rest > 0:
                    self._stopping.wait(rest)
            self._poked.clear()
