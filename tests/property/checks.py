"""The invariants, each a function (world, decisions) -> list of violations (empty: holds).

Every check works from the input domain values and the Decisions alone (see ledger).
"""

from __future__ import annotations

from hypothesis import currently_in_test_context, event

from phalanx.domain.job import TaskPhase
from phalanx.engine import Decisions, run_cycle

from .ledger import TOLERANCE, Ledger, excess
from .world import World


def run(world: World) -> Decisions:
    """One cycle over a fresh snapshot of ``world``; what it did shows in the test statistics
    (``pytest --hypothesis-show-statistics``), so a property that checks nothing is visible."""
    decisions = run_cycle(world.snapshot(), world.config, now=world.now)
    if not currently_in_test_context():  # find() runs outside one
        return decisions
    for kind, happened in (
        ("binds", decisions.binds),
        ("pipelines", decisions.pipelined),
        ("reclaim", [e for e in decisions.evictions if e.action == "reclaim"]),
        ("preempt", [e for e in decisions.evictions if e.action == "preempt"]),
        ("reservations", decisions.reservations),
    ):
        if happened:
            event(f"cycle {kind}")
    return decisions


def node_violations(world: World, decisions: Decisions) -> list[str]:
    """Binds fit next to every task holding the node; pipelined tasks fit once releases end."""
    found = []
    nodes = {n.name: n for n in world.nodes}
    loads = Ledger(world, decisions).node_loads()
    for name, load in loads.items():
        node = nodes[name]
        if over := excess(load.now, node.capacity):
            found.append(f"{name}: held + binds exceed capacity by {over}")
        if over := excess(load.later, node.capacity):
            found.append(f"{name}: kept + binds + pipelined exceed capacity by {over}")
        if node.max_tasks is not None and load.tasks_now > node.max_tasks:
            found.append(
                f"{name}: {load.tasks_now} tasks now (with binds), max_tasks={node.max_tasks}"
            )
    for bind in decisions.binds:
        if not nodes[bind.node].schedulable:
            found.append(f"{bind.task} bound to cordoned node {bind.node}")
    found += _gpu_id_violations(world, decisions)
    return found


def _gpu_id_violations(world: World, decisions: Decisions) -> list[str]:
    """Every bind names cards that can serve it: whole GPUs nobody else holds, or a share of
    one card that still has that much free. The cards held before the cycle are those a
    fresh snapshot gives the world's tasks (the lowest-index cards that serve each)."""
    snapshot = world.snapshot()
    found = []
    for bind in decisions.binds:
        job = snapshot.jobs[bind.job]
        role = next(r for r in job.roles if r.name == bind.role)
        node = snapshot.node_index[bind.node]
        if role.cards is None:
            if bind.gpus:
                found.append(f"{bind.task} asks for no GPU but got cards {bind.gpus}")
            continue
        if not snapshot.cards.serves(role.cards, node, bind.gpus):
            found.append(
                f"{bind.task} got cards {bind.gpus} of {bind.node}, which cannot serve "
                f"{role.cards.describe()}"
            )
            continue
        snapshot.cards.take(role.cards, node, bind.gpus)
    return found


def task_limit_violations(world: World, decisions: Decisions) -> list[str]:
    """Once releasing and evicted tasks are gone, no node runs more than max_tasks tasks."""
    found = []
    loads = Ledger(world, decisions).node_loads()
    for node in world.nodes:
        later = loads[node.name].tasks_later
        if node.max_tasks is not None and later > node.max_tasks:
            found.append(
                f"{node.name}: {later} tasks once releases end (pipelined included), "
                f"max_tasks={node.max_tasks}"
            )
    return found


def partial_bind_violations(world: World, decisions: Decisions) -> list[str]:
    """A job gets binds only when its ready tasks then reach minAvailable."""
    found = []
    ledger = Ledger(world, decisions)
    for job in world.jobs:
        ready, _, binds, evictions, _ = ledger.job_counts(job)
        after = ready - evictions + binds
        if binds and after < job.gang_size:
            found.append(
                f"{job.name}: {binds} bind(s) leave {after} ready < minAvailable {job.gang_size}"
            )
    return found


def partial_remnant_violations(world: World, decisions: Decisions) -> list[str]:
    """No job is left with part of a gang: after evictions, whatever still runs or is
    pipelined reaches minAvailable (with ready tasks), or nothing is left; and a job's
    pipelined tasks plus its ready tasks reach minAvailable."""
    found = []
    ledger = Ledger(world, decisions)
    for job in world.jobs:
        ready, running, binds, evictions, pipelined = ledger.job_counts(job)
        gang = job.gang_size
        after = ready - evictions + binds
        left = running - evictions + binds + pipelined
        if evictions and left > 0 and after + pipelined < gang:
            found.append(
                f"{job.name}: evictions leave {left} task(s) running or pipelined, "
                f"{after} ready + {pipelined} pipelined < minAvailable {gang}"
            )
        elif pipelined and after + pipelined < gang:
            found.append(f"{job.name}: {pipelined} pipelined + {after} ready < minAvailable {gang}")
    return found


def _overcommit_below(world: World, ledger: Ledger, queue: str) -> bool:
    below = ledger.subtree(queue)
    return any(q.overcommit for q in world.queues if q.name in below)


def capability_violations(world: World, decisions: Decisions) -> list[str]:
    """No queue without overcommit work below it grows past its capability (zeros included).

    A queue already above its capability in a resource may not grow in that resource.
    """
    found = []
    ledger = Ledger(world, decisions)
    usage = ledger.queue_usage()
    for queue in world.queues:
        if queue.capability is None or _overcommit_below(world, ledger, queue.name):
            continue
        before, after = usage[queue.name]
        limit = {k: max(v, before.get(k, 0.0)) for k, v in queue.capability.items()}
        over = {
            k: after.get(k, 0.0) - v for k, v in limit.items() if after.get(k, 0.0) > v + TOLERANCE
        }
        if over:
            found.append(
                f"queue {queue.name}: capability {dict(queue.capability.items())}, "
                f"before {before}, after {after}: over by {over}"
            )
    return found


def guarantee_violations(world: World, decisions: Decisions) -> list[str]:
    """No queue at or above its guarantee in a resource drops below it through others' reclaim."""
    found = []
    usage = Ledger(world, decisions).queue_usage(evictions="reclaim-from-outside")
    for queue in world.queues:
        before, after = usage[queue.name]
        for name, floor in queue.guarantee.items():
            was, now = before.get(name, 0.0), after.get(name, 0.0)
            if was + TOLERANCE >= floor and now + TOLERANCE < floor:
                found.append(
                    f"queue {queue.name}: {name} guarantee {floor:g}, {was:g} before, "
                    f"{now:g} after reclaim"
                )
    return found


def reason_violations(world: World, decisions: Decisions) -> list[str]:
    """Every job left pending (not ready, nothing placed) has a reason with a message.

    And no job whose gang is ready is reported unschedulable.
    """
    found = []
    ledger = Ledger(world, decisions)
    for job in world.jobs:
        ready, _, binds, evictions, pipelined = ledger.job_counts(job)
        waiting = any(t.phase is TaskPhase.PENDING for t in job.all_tasks())
        is_ready = ready - evictions + binds >= job.gang_size
        reason = decisions.reason_for(job.name)
        if waiting and not is_ready and not binds and not pipelined:
            if reason is None:
                found.append(f"{job.name} left pending without a reason")
            elif not reason.message.strip():
                found.append(f"{job.name} left pending with an empty message ({reason.code})")
        if is_ready and reason is not None:
            found.append(f"{job.name} is ready, yet reported unschedulable: {reason.message}")
    return found


def report(world: World, decisions: Decisions, violations: list[str]) -> str:
    """A failure message: the violations, the input and the decisions."""
    return "\n".join(
        [
            *violations,
            "--- input",
            world.describe(),
            "--- decisions",
            *(f"bind {b.task} -> {b.node}" for b in decisions.binds),
            *(f"pipeline {p.task} -> {p.node}" for p in decisions.pipelined),
            *(f"evict {e.task} on {e.node} ({e.action} by {e.by})" for e in decisions.evictions),
            *(f"reserve {r.job} on {r.nodes} at {r.start_time:g}" for r in decisions.reservations),
            *(f"unschedulable {u.job}: {u.reason.message}" for u in decisions.unschedulable),
        ]
    )
