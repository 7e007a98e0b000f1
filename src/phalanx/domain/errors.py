"""The exception tree of phalanx.

Expected outcomes (a job that cannot be placed, a queue over quota) are values, not
exceptions. Exceptions are for bad input and for bugs::

    PhalanxError
    ├── InvalidInput            bad input from a person or a file; names the field and the fix
    │   ├── QuantityError       a resource quantity that does not parse ("16GB" -> "16Gi")
    │   └── DocumentError       a YAML/JSON document that does not validate
    ├── ConfigError             a scheduler configuration that cannot be built
    │   └── PluginError         an unknown, duplicate or broken plugin
    ├── IllegalTransition       a lifecycle edge that the transition table does not allow
    └── EngineInvariantError    a bug: the engine reached a state its contracts forbid
"""

from __future__ import annotations


class PhalanxError(Exception):
    """Root of every error phalanx raises on purpose."""


class InvalidInput(PhalanxError):
    """Bad input. The message names the offending field and how to fix it."""

    def __init__(self, message: str, *, field: str | None = None, fix: str | None = None) -> None:
        self.field = field
        self.fix = fix
        parts = [f"{field}: {message}" if field else message]
        if fix:
            parts.append(f"fix: {fix}")
        super().__init__("; ".join(parts))


class QuantityError(InvalidInput):
    """A resource quantity that does not parse like a Kubernetes quantity."""


class DocumentError(InvalidInput):
    """A document (Queue, Job, Cluster, SchedulerConfig ...) that does not validate."""


class ConfigError(PhalanxError):
    """A scheduler configuration that cannot be turned into a session."""


class PluginError(ConfigError):
    """An unknown, duplicate or broken plugin or action."""


class IllegalTransition(PhalanxError):
    """A phase change that the lifecycle table forbids."""


class EngineInvariantError(PhalanxError):
    """The engine reached a state its contracts forbid. Always a bug."""
