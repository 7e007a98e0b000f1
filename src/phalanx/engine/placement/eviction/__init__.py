"""Eviction: which running tasks may make room for a waiting gang, and making it.

``victims`` finds and orders victims (same-queue work, over-deserved queues' work) and
evicts them gang-aware; ``gangs`` makes room for a whole waiting gang or none;
``growth`` is the elastic jobs' lent growth, which any waiting gang takes back. Actions
(preempt, reclaim, elastic, enqueue's admission) use them; the framework does not.
"""
