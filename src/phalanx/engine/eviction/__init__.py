"""Eviction: which running tasks may make room for a waiting gang, and making it.

``victims`` finds and orders victims (same-queue work, over-deserved queues' work) and
evicts them gang-aware; ``gangs`` makes room for a whole waiting gang or none. Actions
(preempt, reclaim, backfill's reservations) use them; the framework does not.
"""
