"""GPU telemetry and health: what a node's cards do, what each task does with them.

``readings`` (values), ``nvml`` (the one adapter to NVIDIA's driver, through
nvidia-ml-py), ``recorded`` (a recorded NVML for tests and demos), ``sampler``
(periodic readings attributed to tasks) and ``health`` (whether a card may take work).
"""
