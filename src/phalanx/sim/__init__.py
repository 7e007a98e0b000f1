"""The trace-driven simulator: the policy engine, unchanged, driven by a virtual clock."""
