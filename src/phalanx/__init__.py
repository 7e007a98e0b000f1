"""phalanx: a scheduler and workflow engine for AI jobs on shared GPU clusters."""

__version__ = "0.1.0"
