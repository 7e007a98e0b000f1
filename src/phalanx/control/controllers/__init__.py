"""Controllers: the loop that owns job and task phases (scheduler tick + lifecycle)."""
