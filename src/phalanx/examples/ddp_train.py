"""A small data-parallel training run: every task is one rank of ``torch.distributed``.

Run it as a phalanx job with one role of N replicas: the executor injects ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``, which ``init_process_group`` reads.
It uses the ``gloo`` backend on CPUs; ``--device cuda`` trains on each task's GPU (the
one ``CUDA_VISIBLE_DEVICES`` gives it) over ``nccl``, with a wider model to keep it busy.
Each rank fits a linear model to its own shard of synthetic data; gradients are averaged
across ranks by DistributedDataParallel, so every rank ends with the same weights, which
the run checks before it reports success.

    python -m phalanx.examples.ddp_train [--steps 200]

Elastic: give the role ``elastic: {minReplicas, maxReplicas}`` and run it under
PyTorch's elastic launcher, which reads the rendezvous phalanx gives each replica
(``PET_*``)::

    python -m torch.distributed.run -m phalanx.examples.ddp_train --checkpoint DIR/ckpt.pt

When replicas join or leave, torchrun restarts the workers in a new world; with
``--checkpoint`` each worker resumes from the last saved step (model and optimizer), so
the step count goes on rising and the loss on falling across every rescale. Rank 0
reports its progress and step time to phalanx (``phalanx.client.progress``), which a
goodput-aware policy learns from.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from phalanx.client import progress

#: Samples per rank per step.
BATCH = 32


def main(argv: list[str] | None = None) -> int:
    """Train; 0 when the ranks agree on the final weights and the loss went down."""
    import torch  # noqa: PLC0415  # heavy and optional: only tasks need it
    import torch.distributed as dist  # noqa: PLC0415

    args = _arguments(argv)
    torch.set_num_threads(1)
    device = torch.device(args.device)
    if args.device == "cuda":
        torch.cuda.set_device(0)  # the task's own card: CUDA_VISIBLE_DEVICES names it alone
        device = torch.device("cuda", 0)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = _model(torch, args.width).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start, first = _resume(torch, args.checkpoint, model, optimizer)
    if rank == 0 and start:
        print(f"resumed at step {start} with {world} ranks", flush=True)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[0] if args.device == "cuda" else None
    )
    truth = torch.randn(16, 1, generator=torch.Generator().manual_seed(7)).to(device)
    hosts: list[str] = [""] * world
    dist.all_gather_object(hosts, socket.gethostname())
    last, began = 0.0, time.perf_counter()
    for step in range(start, args.steps):
        data = torch.Generator().manual_seed(1_000_003 * step + rank)  # this rank's shard
        x = torch.randn(BATCH, 16, generator=data).to(device)
        y = x @ truth + 0.01 * torch.randn(BATCH, 1, generator=data).to(device)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        last = mean.item()
        first = last if first is None else first
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {last:.5f}  (mean of {world} ranks)", flush=True)
            _report(step + 1, world, hosts, (time.perf_counter() - began) / (step - start + 1))
        if rank == 0 and args.checkpoint is not None and (step + 1) % args.save_every == 0:
            _save(torch, args.checkpoint, model, optimizer, step + 1, first)
        if args.step_seconds:
            time.sleep(args.step_seconds)
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    agree = all(torch.allclose(gathered[0], other) for other in gathered)
    if rank == 0:
        print(f"ranks agree on the weights: {agree}; loss {first:.4f} -> {last:.5f}", flush=True)
    dist.destroy_process_group()
    return 0 if agree and first is not None and last < first else 1


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="save progress here every --save-every steps and resume from it at start",
    )
    parser.add_argument("--save-every", type=int, default=5)
    parser.add_argument(
        "--step-seconds", type=float, default=0.0, help="pause after each step (to watch it)"
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: train on this task's GPU over nccl (default: CPUs over gloo)",
    )
    parser.add_argument(
        "--width", type=int, default=0, help="a hidden layer this wide (0: a linear model)"
    )
    return parser.parse_args(argv)


def _model(torch: Any, width: int) -> Any:
    """A linear model of 16 inputs, or one with a hidden layer ``width`` wide."""
    if width <= 0:
        return torch.nn.Linear(16, 1)
    return torch.nn.Sequential(
        torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 1)
    )


def _report(step: int, world: int, hosts: list[str], seconds: float) -> None:
    """Tell phalanx how far training is and how long a step takes at this size."""
    timing = progress.Timing(
        nodes=len(set(hosts)), replicas=world, local_batch=BATCH, step_seconds=seconds
    )
    progress.report(
        step=step,
        samples_per_second=BATCH * world / seconds,
        batch_size=BATCH * world,
        timings=[timing],
    )


def _resume(torch: Any, path: Path | None, model: Any, optimizer: Any) -> tuple[int, float | None]:
    """Load the checkpoint at ``path`` into ``model`` and ``optimizer`` if there is one:
    the step to go on from and the first step's loss (0 and None: none yet)."""
    if path is None or not path.exists():
        return 0, None
    saved = torch.load(path, weights_only=True)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    return int(saved["step"]), float(saved["first"])


def _save(torch: Any, path: Path, model: Any, optimizer: Any, step: int, first: float) -> None:
    """Write the checkpoint whole or not at all (a rename), so a worker stopped while
    saving leaves the previous one."""
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "first": first,
    }
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    torch.save(state, partial)
    partial.replace(path)


if __name__ == "__main__":
    sys.exit(main())
