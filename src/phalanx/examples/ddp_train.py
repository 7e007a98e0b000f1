"""A small data-parallel training run: every task is one rank of ``torch.distributed``.

Run it as a phalanx job with one role of N replicas: the executor injects ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``, which ``init_process_group`` reads.
It uses the ``gloo`` backend, so it trains on CPUs (and on GPUs' hosts just the same).
Each rank fits a linear model to its own shard of synthetic data; gradients are averaged
across ranks by DistributedDataParallel, so every rank ends with the same weights, which
the run checks before it reports success.

    python -m phalanx.examples.ddp_train [--steps 200]
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Train; 0 when the ranks agree on the final weights and the loss went down."""
    import torch  # noqa: PLC0415  # heavy and optional: only tasks need it
    import torch.distributed as dist  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Linear(16, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    truth = torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
    shard = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    first = last = 0.0
    for step in range(args.steps):
        x = torch.randn(32, 16, generator=shard)
        y = x @ truth + 0.01 * torch.randn(32, 1, generator=shard)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        first = mean.item() if step == 0 else first
        last = mean.item()
        if rank == 0 and (step % 50 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {last:.5f}  (mean of {world} ranks)", flush=True)
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    agree = all(torch.allclose(gathered[0], other) for other in gathered)
    if rank == 0:
        print(f"ranks agree on the weights: {agree}; loss {first:.4f} -> {last:.5f}", flush=True)
    dist.destroy_process_group()
    return 0 if agree and last < first else 1


if __name__ == "__main__":
    sys.exit(main())
