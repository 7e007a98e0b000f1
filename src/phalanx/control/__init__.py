"""The control plane: HTTP API, store, controllers and the process that runs them (``phalanx up``).

The API records intent (a job was submitted, a cancel was asked for); the scheduler
controller is the single writer of job and task phases; executors report events.
"""
