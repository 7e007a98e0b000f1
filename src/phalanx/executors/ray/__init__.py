"""The Ray executor: phalanx's decisions carried out on the nodes of a Ray cluster.

- ``nodes``: every alive Ray node as a phalanx ``Node``, GPUs probed on the node itself;
- ``agent``: the detached actor on each node that runs its tasks (a ``LocalExecutor``);
- ``cluster``: the connection, the nodes as they join and die, the agents and their news;
- ``executor``: ``RayExecutor``, the ``Executor`` the controller drives.
"""
