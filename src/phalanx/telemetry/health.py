"""Whether a card may take work, judged from its readings. Pure: no I/O, no clock.

``CardHealth`` is fed one node's readings, card by card, with the time each was taken
(``observe``), and answers ``verdict(index)``: None while the card is healthy, else one
sentence a person can act on, naming the card and the cause ("GPU 3
(GPU-47daa2ad-...): XID 79, the GPU has fallen off the bus: reboot the node"). A
verdict holds until an admin clears it (``clear``: the uncordon); judgement then starts
afresh from the next reading.

The causes, most severe first (the first that applies is the verdict):

1. an XID of ``HealthRules.card_xids`` in the reading's ``xids``: the card itself is
   broken. The set and its advice follow NVIDIA's XID catalog for Ampere and newer
   (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): the XIDs
   whose immediate action is RESET_GPU or RESTART_BM, the double-bit ECC error (48) and
   the NVLink errors (74, 144-150). XIDs an application causes (13, 31, 43, 45, 68,
   69 ...), the row remapper's event (63: judged by the rows below), the contained
   memory error (94: the application must restart; a pending remap is judged below),
   the high single-bit ECC rate (92) and the recovery-action note (154) are not faults
   of the card;
2. NVML cannot read the card (``CardReading.error``: lost, needs a reset);
3. row remapping failed (the card's memory cannot be repaired);
4. a row remap is pending (it takes effect at the next reset of the GPU);
5. its uncorrectable remapped rows grew since the previous reading;
6. its PCIe replays grew by more than ``HealthRules.pcie_replays`` within ``window``
   seconds (a bad link, riser or seating).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.telemetry.readings import CardReading, NodeSample

_RESET: Final = "reset the GPU"
_NVLINK: Final = "an NVLink error ({}): reset the GPU and check its NVLink"

#: The XIDs that mean the card itself is broken, each with what it means and what to do.
CARD_XIDS: Final[Mapping[int, str]] = MappingProxyType(
    {
        46: f"the GPU stopped processing: {_RESET}",
        48: f"an uncorrectable double-bit ECC error in its memory: {_RESET}",
        62: f"an internal micro-controller halted: {_RESET}",
        64: f"recording a row remap or page retirement failed: {_RESET}",
        74: _NVLINK.format("NVLink"),
        79: "the GPU has fallen off the bus: reboot the node",
        95: f"an uncontained memory error: {_RESET}",
        109: f"a context switch timed out: {_RESET}",
        110: f"a security fault: {_RESET}",
        119: f"a call to its GSP firmware timed out: {_RESET}",
        120: f"its GSP firmware failed: {_RESET}",
        136: f"link training failed: {_RESET}",
        140: f"an unrecovered ECC error: {_RESET}",
        143: f"the GPU failed to initialise: {_RESET}",
        144: _NVLINK.format("SAW"),
        145: _NVLINK.format("RLW"),
        146: _NVLINK.format("TLW"),
        147: _NVLINK.format("TREX"),
        148: _NVLINK.format("NVLPW_CTRL"),
        149: _NVLINK.format("NETIR"),
        150: _NVLINK.format("MSE"),
        155: f"an NVLink software-defined error: {_RESET}",
        156: f"a resource retirement event: {_RESET}",
        158: f"a fatal GPU timeout: {_RESET}",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthRules:
    """What makes a card unfit for work.

    ``card_xids``: the XIDs that mean the card itself is broken, each with the words a
    verdict uses (default ``CARD_XIDS``). ``pcie_replays``: the PCIe replays allowed
    within ``window`` seconds."""

    card_xids: Mapping[int, str] = field(default_factory=lambda: CARD_XIDS)
    pcie_replays: int = 100
    window: float = 60.0

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise InvalidInput(
                f"{self.window!r} is not a span of time", field="window", fix="give seconds > 0"
            )
        if self.pcie_replays < 0:
            raise InvalidInput(
                f"{self.pcie_replays!r} replays", field="pcie_replays", fix="give a count >= 0"
            )


class _Card:
    """What judging one card keeps between its readings."""

    __slots__ = ("replays", "uncorrectable", "verdict")

    def __init__(self) -> None:
        self.verdict: str | None = None
        self.uncorrectable: int | None = None  # at the previous reading
        self.replays: deque[tuple[float, int]] = deque()  # (at, count) within the window


class CardHealth:
    """One node's cards, judged reading by reading (see the module's docstring).

    Deterministic: the same readings at the same times give the same verdicts. Readings
    of one card come in time order."""

    __slots__ = ("_cards", "rules")

    def __init__(self, rules: HealthRules | None = None) -> None:
        self.rules = rules or HealthRules()
        self._cards: dict[int, _Card] = {}

    def observe(self, reading: CardReading, at: float) -> str | None:
        """Judge one reading of one card, taken at ``at`` (seconds); the card's verdict
        after it (a verdict already given holds, whatever the reading)."""
        card = self._cards.setdefault(reading.index, _Card())
        if card.verdict is None:
            cause = self._cause(card, reading, at)
            if cause is not None:
                card.verdict = f"{_name(reading)}: {cause}"
        return card.verdict

    def observe_sample(self, sample: NodeSample) -> dict[int, str]:
        """Judge every card of a node's sample; the verdicts of the node's cards."""
        for reading in sample.cards:
            self.observe(reading, sample.at)
        return self.verdicts()

    def verdict(self, index: int) -> str | None:
        """None while card ``index`` may take work (or has not been seen), else why not."""
        card = self._cards.get(index)
        return None if card is None else card.verdict

    def verdicts(self) -> dict[int, str]:
        """Every card with a verdict, by index (ascending)."""
        return {i: c.verdict for i, c in sorted(self._cards.items()) if c.verdict is not None}

    def clear(self, index: int) -> None:
        """Forget card ``index``'s verdict and history (an admin's uncordon): it is
        judged afresh from its next reading."""
        self._cards.pop(index, None)

    def _cause(self, card: _Card, reading: CardReading, at: float) -> str | None:
        """The first cause that applies to this reading, updating the card's history."""
        rows_before = card.uncorrectable
        if reading.error is None:  # an unread card reads 0: no history of its counters
            card.uncorrectable = reading.remapped_uncorrectable
        grew = self._replays_grew(card, reading, at)
        for xid in reading.xids:
            meaning = self.rules.card_xids.get(xid)
            if meaning is not None:
                return f"XID {xid}, {meaning}"
        if reading.error is not None:
            return reading.error
        if reading.remap_failure:
            return "row remapping failed: its memory cannot be repaired; replace the card"
        if reading.remap_pending:
            return "a row remap is pending: reset the GPU"
        if rows_before is not None and reading.remapped_uncorrectable > rows_before:
            return (
                f"uncorrectable remapped rows went {rows_before} -> "
                f"{reading.remapped_uncorrectable}: reset the GPU and run its diagnostics"
            )
        return grew

    def _replays_grew(self, card: _Card, reading: CardReading, at: float) -> str | None:
        """Whether the PCIe replays grew by more than the rules allow within the window
        (an unread card leaves the count's history alone). The growth is measured from
        the oldest reading within the window: readings further apart than the window
        never compare."""
        if reading.error is not None:
            return None
        history = card.replays
        if history and reading.pcie_replays < history[-1][1]:
            history.clear()  # the counter restarted with the driver
        history.append((at, reading.pcie_replays))
        while history[0][0] < at - self.rules.window:
            history.popleft()
        since, first = history[0]
        growth = reading.pcie_replays - first
        if growth <= self.rules.pcie_replays:
            return None
        return (
            f"PCIe replays grew by {growth} in {at - since:.0f} s (more than "
            f"{self.rules.pcie_replays} in {self.rules.window:.0f} s): reseat the card or "
            "check its riser and slot"
        )


def _name(reading: CardReading) -> str:
    return f"GPU {reading.index} ({reading.uuid})" if reading.uuid else f"GPU {reading.index}"
