"""The controllers' thread: a poke ends the wait a tick asked for, and stop ends the
thread mid-rest."""

from __future__ import annotations

import threading

from phalanx.control.controllers.ticker import Ticker

#: Seconds a test waits for what must happen at once (a guard against a hang only).
SOON = 30.0


def test_a_poke_ends_the_wait_and_stop_ends_the_thread() -> None:
    ticks = threading.Semaphore(0)

    def tick() -> float:
        ticks.release()
        return 3600.0  # an hour: only a poke brings the next tick

    ticker = Ticker("test-ticker", tick)
    ticker.start()
    assert ticks.acquire(timeout=SOON)
    ticker.poke()
    assert ticks.acquire(timeout=SOON)
    assert ticker.stop(SOON) and ticker.stopping


def test_stop_cuts_a_rest_short_that_pokes_do_not() -> None:
    ticked = threading.Event()
    rested = threading.Event()

    def tick() -> float:
        ticked.set()
        return 0.0

    def pace() -> float:
        rested.set()
        return 3600.0

    ticker = Ticker("test-ticker", tick, pace=pace)
    ticker.start()
    assert rested.wait(SOON)
    ticked.clear()
    ticker.poke()
    assert not ticked.wait(0.2)  # resting: the poke waits for the rest's end
    assert ticker.stop(SOON)
