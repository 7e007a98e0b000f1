"""Right-sizing by measurement (issue 40, KubeDL-Morphling's idea): the library a tuning
controller stands on. Each module has one purpose:

- ``load``: an open-loop HTTP load generator (no coordinated omission) and its result;
- ``parameter``: one dimension of a space (a replica's resources, environment or
  arguments), validated when it is made;
- ``space``: a search space of parameters, its full grid, and its optuna distributions;
- ``search``: an ask/tell search over a space (TPE, GP, random or grid), restorable
  from stored trial records;
- ``objective``: what a trial's measurement is worth (cheapest spec within an SLO, or
  the most requests/s per unit of cost), from the admin's prices.

The package imports no part of the control plane, the executors, the engine or the
faces (tests/unit/test_architecture.py holds it to that). This module re-exports
nothing, so that importing the load generator does not load optuna.
"""
