"""The gateway's routes: predictors drawn by traffic weight among those with a free
Ready replica, then the replica with the fewest requests in flight; exact counts when
the table changes under requests in flight; waiters woken by any change."""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter

from phalanx.gateway.routes import Predictor, Replica, Routes, Service


def service(*predictors: Predictor, waking: bool = False) -> Service:
    return Service(name="svc", predictors=predictors, waking=waking)


def predictor(name: str, weight: int, replicas: int, concurrency: int = 0) -> Predictor:
    made = tuple(
        Replica(f"{name}-{i}", f"http://127.0.0.1:{9000 + i}", name) for i in range(replicas)
    )
    return Predictor(name=name, weight=weight, replicas=made, concurrency=concurrency)


def test_predictors_are_drawn_by_their_weight() -> None:
    routes = Routes(random.Random(7))
    routes.replace({"svc": service(predictor("main", 90, 1), predictor("canary", 10, 1))})
    drawn = Counter()
    for _ in range(5_000):
        replica = routes.acquire("svc")
        assert replica is not None
        drawn[replica.predictor] += 1
        routes.release(replica)
    assert 0.08 < drawn["canary"] / 5_000 < 0.12, drawn


def test_a_predictor_at_weight_zero_or_without_a_replica_gets_nothing() -> None:
    routes = Routes(random.Random(1))
    routes.replace(
        {"svc": service(predictor("off", 0, 2), predictor("none", 50, 0), predictor("on", 50, 1))}
    )
    assert {routes.acquire("svc").predictor for _ in range(50)} == {"on"}  # type: ignore[union-attr]
    assert routes.acquire("elsewhere") is None


def test_the_replica_with_the_fewest_requests_in_flight_is_chosen() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 100, 3))})
    first = [routes.acquire("svc") for _ in range(3)]
    assert sorted(r.name for r in first if r) == ["main-0", "main-1", "main-2"]
    assert routes.in_flight("svc") == {"main-0": 1, "main-1": 1, "main-2": 1}
    assert first[1] is not None
    routes.release(first[1])
    again = routes.acquire("svc")
    assert again is not None and again.name == first[1].name
    assert routes.acquire("svc", exclude=["main-0", "main-1"]) == Replica(
        "main-2", "http://127.0.0.1:9002", "main"
    )


def test_a_replica_at_its_concurrency_gets_no_more() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 100, 2, concurrency=2))})
    held = [routes.acquire("svc") for _ in range(4)]
    assert all(held) and routes.acquire("svc") is None
    routes.release(held[0])  # type: ignore[arg-type]
    assert routes.acquire("svc") is not None


def test_counts_stay_exact_when_the_table_changes_under_requests() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 100, 2))})
    gone = routes.acquire("svc")
    assert gone is not None
    routes.replace({"svc": service(predictor("main", 100, 0))})
    assert routes.in_flight("svc") == {} and routes.acquire("svc") is None
    routes.release(gone)
    routes.release(gone)  # a second release of one request never goes negative
    routes.replace({"svc": service(predictor("main", 100, 2))})
    assert routes.in_flight("svc") == {"main-0": 0, "main-1": 0}


def test_concurrent_requests_leave_no_count_behind() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 50, 3, concurrency=4), predictor("b", 50, 2))})

    def work() -> None:
        for _ in range(2_000):
            replica = routes.acquire("svc")
            if replica is not None:
                routes.release(replica)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(routes.in_flight("svc").values()) == {0}


def test_a_waiter_is_woken_by_a_table_replaced_on_another_thread() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 100, 0), waking=True)})

    async def held() -> Replica | None:
        since = routes.version
        assert routes.acquire("svc") is None
        threading.Timer(0.05, routes.replace, [{"svc": service(predictor("main", 100, 1))}]).start()
        await routes.wait(since, timeout=30)
        return routes.acquire("svc")

    replica = asyncio.run(held())
    assert replica is not None and replica.name == "main-0"


def test_a_change_before_the_wait_is_not_missed() -> None:
    routes = Routes()

    async def late() -> None:
        since = routes.version
        routes.changed()  # between the look and the wait
        await routes.wait(since, timeout=30)  # returns at once, not after 30 s

    asyncio.run(asyncio.wait_for(late(), 10))


def test_demand_is_in_flight_plus_a_share_of_the_held_requests() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 75, 2), predictor("canary", 25, 1))})
    main = routes.acquire("svc", exclude=["canary-0"])
    assert main is not None
    routes.holding("svc", +4)
    assert routes.demand("svc", main.predictor) == 1 + 3
    assert routes.demand("svc", "canary") == 1
    routes.holding("svc", -4)
    routes.release(main)
    assert routes.demand("svc", "main") == routes.demand("nothing", "main") == 0


def test_a_released_slot_wakes_a_request_waiting_for_one() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 100, 1, concurrency=1))})
    busy = routes.acquire("svc")
    assert busy is not None

    async def held() -> Replica | None:
        since = routes.version
        assert routes.acquire("svc") is None
        threading.Thread(target=routes.release, args=[busy]).start()
        await routes.wait(since, timeout=600)
        return routes.acquire("svc")

    # far below the wait's own timeout: only a wake-up returns in time
    assert asyncio.run(asyncio.wait_for(held(), 60)) == busy


def test_one_replace_wakes_waiters_on_every_event_loop() -> None:
    routes = Routes()
    since = routes.version
    woken: list[str] = []
    registered = threading.Barrier(3)

    def waiter(name: str) -> None:
        async def wait() -> None:
            waiting = asyncio.ensure_future(routes.wait(since, timeout=600))
            await asyncio.sleep(0)  # let it register on this loop
            registered.wait(30)
            await asyncio.wait_for(waiting, 60)
            woken.append(name)

        asyncio.run(wait())

    threads = [threading.Thread(target=waiter, args=[n]) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    registered.wait(30)
    routes.replace({"svc": service(predictor("main", 100, 1))})
    for thread in threads:
        thread.join(90)
    assert sorted(woken) == ["a", "b"]


def test_a_wait_without_a_change_returns_at_its_timeout() -> None:
    routes = Routes()
    asyncio.run(routes.wait(routes.version, timeout=0.01))  # returns, raises nothing
    assert routes.version == 0


def test_rows_for_a_scrape_list_every_ready_replica_and_the_held_requests() -> None:
    routes = Routes()
    routes.replace({"svc": service(predictor("main", 75, 2), predictor("canary", 25, 1))})
    taken = routes.acquire("svc", exclude=["main-0", "main-1"])
    assert taken is not None
    routes.holding("svc", +2)
    assert routes.in_flight_rows() == [
        ("svc", "main", "main-0", 0),
        ("svc", "main", "main-1", 0),
        ("svc", "canary", "canary-0", 1),
    ]
    assert routes.held() == {"svc": 2}
    routes.holding("svc", -2)
    routes.release(taken)
    assert routes.held() == {} and sum(routes.in_flight("svc").values()) == 0
