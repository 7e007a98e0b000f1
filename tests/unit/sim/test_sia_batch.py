"""A fixed batch split on a placement as Sia's ``Job.update_local_bsz`` splits it.

On Sia's per-type curves (read in place from ``sia-philly/app_profiles``, skipped when
absent) the per-GPU batch is cut by the largest measured on the placement
(``placements-<type>.csv``, else ``scalability-<type>.csv``), held to the largest measured
at that GPU count, then to the largest total batch; the default curves keep Pollux's
split, and yolov3's limit of 8 per step, whatever the placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from phalanx.sim.elastic.batch import (
    BatchConfig,
    fixed_batch,
    placement_max_local,
    replicas_max_local,
)
from phalanx.sim.elastic.profile import AppProfile, Curve, build_profile
from phalanx.sim.elastic.progress import fixed_seconds
from phalanx.sim.traces.pollux import read_gpu_profiles, read_profile

pytestmark = pytest.mark.traces


def test_a_listed_placement_splits_as_sia_does(profiles: Path) -> None:
    """deepspeech2 at 640 on 8 + 4 A100s: placement ``48`` measures up to 40 per GPU, so
    54 per GPU is two steps of 27, capped at 640 / 24 = 26 (Sia: 26 and one extra step)."""
    a100 = read_gpu_profiles(profiles / "deepspeech2")["A100"]
    assert placement_max_local(a100, (8, 4)) == placement_max_local(a100, (4, 8)) == 40
    config = fixed_batch(a100, 12, 640, placement=(8, 4))
    assert config == BatchConfig(replicas=12, atomic=26, accumulation=1)
    # without the placement, the profile's largest (320): one step of 54, capped at 53
    assert fixed_batch(a100, 12, 640) == BatchConfig(replicas=12, atomic=53, accumulation=0)
    # the whole job's time follows the split: two steps of 26 are slower than one of 53
    sia = fixed_seconds(a100, (8, 4), 640, interpolate=True)
    pollux = fixed_seconds(replace(a100, gpu_model=""), (8, 4), 640, interpolate=True)
    assert sia is not None and pollux is not None and sia > pollux
    on_rtx = read_gpu_profiles(profiles / "deepspeech2")["RTX2080Ti"]
    assert fixed_batch(on_rtx, 12, 640, placement=(8, 4)) == config


def test_an_unlisted_placement_takes_the_largest_of_larger_shapes(profiles: Path) -> None:
    """Six T4 nodes of one GPU each is not in placements-aws.csv: the largest per-GPU
    batch among scalability-aws.csv's rows of at least 6 nodes and 6 GPUs (80)."""
    t4 = read_gpu_profiles(profiles / "deepspeech2")["T4"]
    placement = (1,) * 6
    assert int("111111") not in t4.placements
    wider = [int(curve[0].max()) for (n, r), curve in t4.scalability.items() if n >= 6 and r >= 6]
    assert placement_max_local(t4, placement) == max(wider) == 80
    # 640 / 6 = 107 per GPU: two steps of 54 (6 T4s hold 80), capped at 640 / 12 = 53
    assert replicas_max_local(t4, 6) == 80
    assert fixed_batch(t4, 6, 640, placement=placement) == BatchConfig(
        replicas=6, atomic=53, accumulation=1
    )
    # 16 nodes is the most any row has: nothing to say for 17, the profile's largest
    assert placement_max_local(t4, (1,) * 17) is None
    assert fixed_batch(t4, 17, 640, placement=(1,) * 17) == fixed_batch(t4, 17, 640)


def test_the_memory_cap_holds_a_step_to_the_gpu_counts_largest() -> None:
    """Sia holds the step to the largest measured at the GPU count in the placements
    file even where the scalability file allows more for an unlisted placement."""
    profile = _toy(
        "T4",
        placements={4: _curve(8), 22: _curve(8)},
        scalability={(4, 4): _curve(16)},
    )
    assert placement_max_local(profile, (1, 1, 1, 1)) == 16
    assert replicas_max_local(profile, 4) == 8
    config = fixed_batch(profile, 4, 64, placement=(1, 1, 1, 1))
    assert config == BatchConfig(replicas=4, atomic=8, accumulation=0)  # Sia's: 32 of 64
    # a listed placement: its own limit already splits 16 per GPU into two steps of 8
    assert fixed_batch(profile, 4, 64, placement=(2, 2)) == BatchConfig(
        replicas=4, atomic=8, accumulation=1
    )
    # the same curves un-typed: Pollux's split by the largest (8), placement or not
    default = _toy("", placements=profile.placements, scalability=profile.scalability)
    assert fixed_batch(default, 4, 64, placement=(1, 1, 1, 1)) == fixed_batch(default, 4, 64)


def test_yolov3_runs_16_per_t4_in_one_step(profiles: Path) -> None:
    by_model = read_gpu_profiles(profiles / "yolov3")
    t4 = by_model["T4"]
    assert (t4.max_local_batch, by_model["A100"].max_local_batch) == (16, 32)
    assert fixed_batch(t4, 4, 64, placement=(4,)) == BatchConfig(
        replicas=4, atomic=16, accumulation=0
    )


def test_the_default_curves_keep_pollux_split_and_yolov3_limit(profiles: Path) -> None:
    """Un-typed curves ignore the placement: yolov3 keeps its 8 per step."""
    default = read_profile(profiles / "yolov3")
    assert default.gpu_model == "" and default.max_local_batch == 8
    for placement in [(4,), (2, 2), (1, 1, 1, 1)]:
        assert fixed_batch(default, 4, 64, placement=placement) == fixed_batch(default, 4, 64)
        assert fixed_batch(default, 4, 64) == BatchConfig(replicas=4, atomic=8, accumulation=1)


def test_the_yolov3_limit_is_on_default_curves_only() -> None:
    assert _toy("", placements={4: _curve(16)}, name="yolov3").max_local_batch == 8
    assert _toy("T4", placements={4: _curve(16)}, name="yolov3").max_local_batch == 16
    assert _toy("", placements={4: _curve(16)}).max_local_batch == 16


def test_a_placement_of_other_size_is_refused(profiles: Path) -> None:
    t4 = read_gpu_profiles(profiles / "yolov3")["T4"]
    with pytest.raises(ValueError, match="does not hold 4 GPUs"):
        fixed_batch(t4, 4, 64, placement=(2,))


def _curve(largest: int) -> Curve:
    """A curve measured at local batches 4 and ``largest``."""
    return (np.array([4.0, float(largest)]), np.array([0.5, 1.0]), np.array([0.1, 0.1]))


def _toy(
    gpu_model: str,
    *,
    placements: Mapping[int, Curve],
    scalability: Mapping[tuple[int, int], Curve] | None = None,
    name: str = "toy",
) -> AppProfile:
    """A profile of ``placements`` on ``gpu_model``, profiled at batches 8 and 64."""
    row = np.array([[1.0, 1.0, 1.0]])
    return build_profile(
        name,
        placements=placements,
        scalability=scalability or {},
        validation={8: row, 64: row},
        gpu_model=gpu_model,
    )
