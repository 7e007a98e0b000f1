"""Pure values shared by every part of phalanx: resources, nodes, queues, jobs, lifecycles, errors.

Nothing here does I/O or reads the clock.
"""
