"""Pipelines of jobs: the ``Pipeline`` document, its graph, the run planner, cache keys, DSL.

Pure: nothing here starts a process, reads the clock or touches a store; the workflow
controller drives it. See each module's docstring for what it guarantees.
"""
