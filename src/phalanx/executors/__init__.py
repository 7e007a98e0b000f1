"""Executors turn Decisions into running tasks and report what happens to them."""
