"""Failed sign-ins, counted per key; a key with too many is locked out for a while.

A key is whatever an attempt is counted against: the client's address (``address_key``)
for every bearer token and console login. One attempt may name several keys; it is
refused while any of them is locked, a failure counts for each, a success clears each.

Guarantees, with the numbers of ``ThrottleSettings``:

- A key's first ``free_failures`` failures cost nothing. Each further one locks the
  key: ``first_lockout`` seconds for the first, twice the previous lock-out for each
  next one, never more than ``max_lockout``.
- ``wait`` says how long a key stays locked (0: it is not); nothing is counted while
  a caller only asks. A lock-out ends by itself: nothing unlocks a key early but a
  success or the quiet period.
- A success clears the key at once; a key with no failure for ``forget_after`` seconds
  is forgotten (its next failure is a first one again).
- At most ``max_keys`` keys are remembered: beyond that, the key whose last failure is
  the oldest is forgotten first, so memory stays bounded whatever the traffic.
- Safe to call from any thread; time comes only from ``clock`` (seconds).
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from phalanx.domain.errors import InvalidInput

#: Lock-outs stop doubling after this many steps (far past any ``max_lockout``): the
#: power stays a finite float.
_MAX_DOUBLINGS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class ThrottleSettings:
    """How failed sign-ins are limited (see the module's guarantees): by default 5 free
    failures, then lock-outs of 1 s, 2 s, 4 s ... up to 15 min; forgotten after an hour
    without a failure; at most 10,000 keys remembered."""

    free_failures: int = 5
    first_lockout: float = 1.0
    max_lockout: float = 900.0
    forget_after: float = 3600.0
    max_keys: int = 10_000

    def __post_init__(self) -> None:
        if self.free_failures < 0:
            raise InvalidInput(
                f"free_failures is {self.free_failures}",
                field="throttle.free_failures",
                fix="give 0 or more",
            )
        if not 0 < self.first_lockout <= self.max_lockout:
            raise InvalidInput(
                f"first_lockout {self.first_lockout} s, max_lockout {self.max_lockout} s",
                field="throttle.first_lockout",
                fix="give 0 < first_lockout <= max_lockout",
            )
        if self.forget_after < self.max_lockout:
            # Shorter, and a key locked for max_lockout would be forgotten by the time the
            # lock-out ends: its free failures would come back after every lock-out.
            raise InvalidInput(
                f"forget_after {self.forget_after} s is shorter than max_lockout "
                f"{self.max_lockout} s",
                field="throttle.forget_after",
                fix="give forget_after >= max_lockout",
            )
        if self.max_keys < 1:
            raise InvalidInput(
                f"max_keys is {self.max_keys}", field="throttle.max_keys", fix="give 1 or more"
            )

    def lockout(self, failures: int) -> float:
        """Seconds a key is locked after its ``failures``-th failure in a row."""
        over = failures - self.free_failures
        if over <= 0:
            return 0.0
        return min(self.first_lockout * 2.0 ** min(over - 1, _MAX_DOUBLINGS), self.max_lockout)


@dataclass(slots=True)
class _Record:
    failures: int
    last: float  # time of the latest failure
    until: float  # locked until then


class Throttle:
    """Failures per key, and the lock-outs they earn (see the module's guarantees)."""

    def __init__(
        self,
        settings: ThrottleSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or ThrottleSettings()
        self._clock = clock
        # Ordered by latest failure, oldest first: the first to go past ``max_keys``.
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, keys: Iterable[str]) -> float:
        """Seconds until none of ``keys`` is locked (0.0: none is)."""
        now = self._clock()
        longest = 0.0
        with self._lock:
            for key in keys:
                record = self._records.get(key)
                if record is None:
                    continue
                if now - record.last >= self.settings.forget_after:
                    del self._records[key]
                    continue
                longest = max(longest, record.until - now)
        return longest

    def failed(self, keys: Iterable[str]) -> float:
        """Count one failure against each of ``keys``; the seconds until none of them
        is locked, now."""
        now = self._clock()
        longest = 0.0
        with self._lock:
            for key in keys:
                record = self._records.pop(key, None)
                if record is None or now - record.last >= self.settings.forget_after:
                    record = _Record(failures=0, last=now, until=now)
                record.failures += 1
                record.last = now
                record.until = max(record.until, now + self.settings.lockout(record.failures))
                self._records[key] = record
                longest = max(longest, record.until - now)
            while len(self._records) > self.settings.max_keys:
                self._records.popitem(last=False)
        return longest

    def succeeded(self, keys: Iterable[str]) -> None:
        """Forget every failure of ``keys``."""
        with self._lock:
            for key in keys:
                self._records.pop(key, None)

    @property
    def tracked(self) -> int:
        """How many keys are remembered."""
        with self._lock:
            return len(self._records)


def address_key(host: str) -> str:
    """The key a client's address is counted under: an IPv4 address as it is (an
    IPv4-mapped IPv6 one too), an IPv6 address by its /64 (a single host commonly holds
    a whole /64), anything else (a Unix socket's name) as given."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"address:{host}"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"address:{address.ipv4_mapped}"
        return f"address:{ipaddress.IPv6Network((address, 64), strict=False)}"
    return f"address:{address}"


def retry_after(wait: float) -> int:
    """``wait`` as a ``Retry-After`` value: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(wait))
