"""Expected values for tests/unit/engine/goodput from Pollux's own code.

Runs Pollux's simulator modules (adaptdl branch osdi21-artifact, ``simulator/``) and
prints JSON. Not a test and not run in CI (CI has no Pollux); run it by hand:

    cd /work/pollux/simulator && /work/pollux/venv/bin/python \
        /work/wt-goodput/tests/reference/pollux_goodput.py \
        > /work/wt-goodput/tests/unit/engine/goodput/pollux_reference.json

Every number comes from a Pollux function: ``applications.APPLICATIONS[...]``
(``get_throughput``, ``get_grad_stats``), ``goodput.fit_perf_params``,
``goodput._obj_fn``, ``goodput.GoodputFunction`` (``throughput``, ``efficiency``,
``optimize``) and ``speedup.SpeedupFunction``.
"""

import json
import sys

import numpy as np

sys.path.insert(0, ".")
from applications import APPLICATIONS
from speedup import SpeedupFunction

import goodput  # Pollux's, from the working directory

# Placements a job passes through as Pollux's agent would observe them (GPUs per node).
HISTORY = [(1,), (2,), (4,), (4, 4), (4, 4, 4, 4), (2, 2, 2)]
PLACEMENTS = [(1,), (2,), (3,), (4,), (2, 2), (4, 4), (1, 1, 1), (4, 4, 4, 4)]


def observe(app, placements):
    """Rows (nodes, replicas, atomic, accum time, sync time) as Job.update_params sees them."""
    rows = []
    for placement in placements:
        replicas = sum(placement)
        batch = max(app.init_batch_size, app.min_local_bsz * replicas)
        atomic = min(int(np.ceil(batch / replicas)), int(app.max_local_bsz))
        step, sync = app.get_throughput(placement, atomic)
        rows.append([len(placement), replicas, atomic, float(step - sync), float(step)])
    return rows


def main():
    out = {"fits": [], "perf": [], "efficiency": [], "optimize": [], "speedup": []}
    allocs_n = [1, 1, 1, 2, 2, 4, 4, 8, 16, 16]
    allocs_r = [1, 2, 4, 2, 8, 4, 16, 32, 16, 64]
    for name in sorted(APPLICATIONS):
        app = APPLICATIONS[name]
        for k in (1, 3, len(HISTORY)):
            rows = observe(app, HISTORY[:k])
            cols = [np.array([r[i] for r in rows]) for i in range(5)]
            params = goodput.fit_perf_params(*cols)
            value = float(goodput._obj_fn(np.array(params), *cols))
            out["fits"].append(
                {"app": name, "rows": rows, "params": list(map(float, params)), "objective": value}
            )
        params = out["fits"][-1]["params"]
        sqr, var = (float(x) for x in app.get_grad_stats(app.init_batch_size, 1))
        fn = goodput.GoodputFunction(params, (sqr, var), app.init_batch_size)
        limits = {
            "max_batch_size": int(app.max_batch_size),
            "min_atomic_bsz": int(app.min_local_bsz),
            "max_atomic_bsz": int(app.max_local_bsz),
        }
        grid = []
        for n, r in zip(allocs_n, allocs_r, strict=True):
            for atomic in (app.min_local_bsz, app.max_local_bsz):
                for accum in (0, 2):
                    grid.append([n, r, int(atomic), accum])
        g = np.array(grid)
        out["perf"].append(
            {
                "app": name,
                "params": params,
                "grid": grid,
                "throughput": fn.throughput(g[:, 0], g[:, 1], g[:, 2], g[:, 3]).tolist(),
            }
        )
        batches = np.geomspace(app.init_batch_size, app.max_batch_size, 9)
        out["efficiency"].append(
            {
                "app": name,
                "grad": [sqr, var],
                "init_batch_size": int(app.init_batch_size),
                "batch_size": batches.tolist(),
                "efficiency": fn.efficiency(batches).tolist(),
            }
        )
        best, atomic, accum = fn.optimize(
            np.array(allocs_n),
            np.array(allocs_r),
            app.max_batch_size,
            (app.min_local_bsz, app.max_local_bsz),
            accumulation=True,
        )
        out["optimize"].append(
            {
                "app": name,
                "params": params,
                "grad": [sqr, var],
                "init_batch_size": int(app.init_batch_size),
                "limits": limits,
                "nodes": allocs_n,
                "replicas": allocs_r,
                "goodput": best.tolist(),
                "atomic_bsz": atomic.tolist(),
                "accum_steps": accum.tolist(),
            }
        )
        speedup = SpeedupFunction(
            fn,
            app.max_batch_size,
            (app.min_local_bsz, app.max_local_bsz),
            accumulation=True,
        )
        nodes = [n for r in range(1, 31) for n in range(1, min(r, 16) + 1)]
        replicas = [r for r in range(1, 31) for n in range(1, min(r, 16) + 1)]
        out["speedup"].append(
            {
                "app": name,
                "params": params,
                "grad": [sqr, var],
                "init_batch_size": int(app.init_batch_size),
                "limits": limits,
                "nodes": [0, *nodes],
                "replicas": [0, *replicas],
                "speedup": speedup(np.array([0, *nodes]), np.array([0, *replicas])).tolist(),
            }
        )
    json.dump(out, sys.stdout, indent=None)
    print()


if __name__ == "__main__":
    main()
