"""The Ray executor's parts (issue 18: running on many machines through Ray).

- ``nodes``: every alive Ray node as a phalanx ``Node``, GPUs probed on the node itself.
"""
