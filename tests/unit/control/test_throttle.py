"""The sign-in throttle on a clock the test moves: free failures, doubling lock-outs up to
a cap, a success or a quiet period clearing a key, bounded memory."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from phalanx.control.throttle import (
    Throttle,
    ThrottleSettings,
    address_key,
    retry_after,
)
from phalanx.domain.errors import InvalidInput

ALICE = ("address:203.0.113.7",)
BOB = ("address:198.51.100.9",)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, **settings: Any) -> Throttle:
    return Throttle(ThrottleSettings(**settings), clock=clock)


def fail(limiter: Throttle, keys: tuple[str, ...], times: int) -> float:
    wait = 0.0
    for _ in range(times):
        wait = limiter.failed(keys)
    return wait


def test_the_first_failures_are_free_and_the_next_one_locks_for_a_second() -> None:
    clock = Clock()
    limiter = throttle(clock)
    assert fail(limiter, ALICE, 5) == 0.0
    assert limiter.wait(ALICE) == 0.0
    assert limiter.failed(ALICE) == 1.0
    assert limiter.wait(ALICE) == 1.0
    clock.now += 0.4
    assert limiter.wait(ALICE) == pytest.approx(0.6)
    clock.now += 0.6
    assert limiter.wait(ALICE) == 0.0


def test_each_further_failure_doubles_the_lock_out_up_to_the_cap() -> None:
    clock = Clock()
    limiter = throttle(clock)
    fail(limiter, ALICE, 5)
    seen = []
    for _ in range(13):
        seen.append(limiter.failed(ALICE))
        clock.now += seen[-1]  # the caller waits out each lock-out, then fails again
    assert seen == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900]


def test_the_settings_change_the_numbers() -> None:
    clock = Clock()
    limiter = throttle(clock, free_failures=0, first_lockout=3, max_lockout=10)
    assert [limiter.failed(ALICE) for _ in range(3)] == [3, 6, 10]
    assert ThrottleSettings().lockout(10_000) == 900  # no overflow, however many


def test_retry_after_is_whole_seconds_rounded_up() -> None:
    assert retry_after(1.0) == 1
    assert retry_after(1.01) == 2
    assert retry_after(0.2) == 1
    assert retry_after(899.5) == 900


def test_a_success_clears_the_key_and_only_that_key() -> None:
    clock = Clock()
    limiter = throttle(clock)
    fail(limiter, ALICE, 7)
    fail(limiter, BOB, 7)
    limiter.succeeded(ALICE)
    assert limiter.wait(ALICE) == 0.0
    assert limiter.wait(BOB) == 2.0
    assert fail(limiter, ALICE, 5) == 0.0  # its free failures are back
    assert limiter.failed(ALICE) == 1.0


def test_failures_are_forgotten_after_a_quiet_period() -> None:
    clock = Clock()
    limiter = throttle(clock, forget_after=3600)
    fail(limiter, ALICE, 5)
    clock.now += 3599
    assert limiter.failed(ALICE) == 1.0  # still within the period: the sixth failure
    clock.now += 3600
    assert limiter.wait(ALICE) == 0.0
    assert limiter.tracked == 0  # asking about a forgotten key drops it
    assert fail(limiter, ALICE, 5) == 0.0


def test_a_locked_key_stays_locked_only_for_its_own_lock_out() -> None:
    """Asking while locked counts nothing: a client that retries too early is not
    locked for longer."""
    clock = Clock()
    limiter = throttle(clock)
    fail(limiter, ALICE, 8)  # locked for 4 s
    for _ in range(100):
        assert limiter.wait(ALICE) > 0
    clock.now += 4
    assert limiter.wait(ALICE) == 0.0


def test_one_attempt_counts_against_each_of_its_keys() -> None:
    """An attempt may be keyed by address and user name: refused while any key is
    locked, a failure counts for each, a success clears each."""
    clock = Clock()
    limiter = throttle(clock)
    from_a = ("address:203.0.113.7", "user:alice")
    from_b = ("address:198.51.100.9", "user:alice")
    fail(limiter, from_a, 3)
    assert fail(limiter, from_b, 3) == 1.0  # alice's sixth failure, from two addresses
    assert limiter.wait(("address:198.51.100.9", "user:bob")) == 0.0
    assert limiter.wait(("address:192.0.2.1", "user:alice")) == 1.0
    limiter.succeeded(from_b)
    assert limiter.wait(from_a) == 0.0


def test_memory_is_bounded_and_the_stalest_key_goes_first() -> None:
    clock = Clock()
    limiter = throttle(clock, max_keys=3)
    fail(limiter, ALICE, 8)
    for n in range(3):
        clock.now += 1
        limiter.failed((f"address:192.0.2.{n}",))
    assert limiter.tracked == 3
    assert limiter.wait(ALICE) == 0.0  # the oldest failure was alice's: forgotten
    assert limiter.failed(("address:192.0.2.0",)) == 0.0  # the second, still counted
    assert limiter.tracked == 3


def test_failures_from_many_threads_are_all_counted() -> None:
    clock = Clock()
    limiter = throttle(clock, free_failures=800, max_keys=10_000)

    def hammer(n: int) -> None:
        for i in range(100):
            limiter.failed(ALICE)
            limiter.failed((f"address:10.{n}.0.{i}",))

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert limiter.wait(ALICE) == 0.0  # exactly 800 failures: all still free
    assert limiter.failed(ALICE) == 1.0
    assert limiter.tracked == 801


def test_addresses_are_keyed_by_host_and_ipv6_by_its_64() -> None:
    assert address_key("203.0.113.7") == "address:203.0.113.7"
    assert address_key("::ffff:203.0.113.7") == "address:203.0.113.7"
    assert address_key("2001:db8:1:2::5") == address_key("2001:db8:1:2:ffff::1")
    assert address_key("2001:db8:1:2::5") == "address:2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::5") != address_key("2001:db8:1:2::5")
    assert address_key("testclient") == "address:testclient"


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"free_failures": -1}, "throttle.free_failures"),
        ({"first_lockout": 0}, "throttle.first_lockout"),
        ({"first_lockout": 10, "max_lockout": 5}, "throttle.first_lockout"),
        ({"max_lockout": 7200}, "throttle.forget_after"),
        ({"max_keys": 0}, "throttle.max_keys"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_field(
    settings: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        ThrottleSettings(**settings)
    assert refused.value.field == field and refused.value.fix
