"""The exception tree of phalanx.

Expected outcomes (a job that cannot be placed, a queue over quota) are values, not
exceptions. Exceptions are for bad input and for bugs. Every exception class of the
package is drawn here, under its one root, with the module it is defined in (none:
this module); a test (tests/unit/domain/test_error_tree.py) holds the two together::

    PhalanxError
    ├── InvalidInput            bad input from a person or a file; names the field and the fix
    │   ├── QuantityError       a resource quantity that does not parse ("16GB" -> "16Gi")
    │   ├── DocumentError       a YAML/JSON document that does not validate
    │   │   └── _Refused        (spec.loader) YAML that parses but that phalanx refuses
    │   ├── GraphError          (spec.pipeline.dag) pipeline steps that do not form a graph
    │   ├── TemplateError       (spec.pipeline.templates) a template or reference that fails
    │   ├── ConditionError      (spec.pipeline.conditions) a step's condition that fails
    │   ├── CronError           (spec.pipeline.cron) a cron expression that never fires
    │   ├── IdentityRefused     (control.tenancy.accounts) a user identity not given
    │   └── TenantPathRefused   (tenantfs) a path a tenant controls, not read as it is
    │       └── TenantPathMissing   (tenantfs) ... because nothing is there
    ├── ContentError            a file or artifact of a run that cannot be read as asked
    │   ├── MissingContent      (workflow.contents) an artifact or file that is not there
    │   ├── OutputError         (workflow.artifacts) an output param missing or mistyped
    │   ├── NoReport            (control.reports) no report of that name to serve
    │   ├── ManifestError       (models.manifest) a model version's manifest not valid
    │   ├── ModelMissing        (models.store) a model version the store does not hold
    │   ├── ModelCorrupt        (models.store) stored bytes that are not their digest's
    │   ├── ImageBuildFailed    (models.image) a model version's image not built, and why
    │   ├── IntakeRefused       (control.controllers.models) a model not registered, and why
    │   ├── CacheFull           (data.cache) a dataset that does not fit in a node's cache
    │   └── CopyFailed          (data.copies) a dataset not copied into a node's cache
    ├── RequestRefused          a request this process refuses, saying what to do instead
    │   ├── ApiError            (control.errors) an API answer {detail, field, fix}
    │   │   └── BodyTooLarge    (control.body_limit) a request body over the limit
    │   ├── LoginRequired       (web.session) a console page asked for without a session
    │   ├── Refused             (web.session) a console page the visitor may not see
    │   ├── CsrfRefused         (web.csrf) a console form without a valid CSRF token
    │   └── AgentRefused        (executors.ray.agent) a node agent called without the key
    ├── RemoteError             a call to another process that failed or was refused
    │   ├── ClientError         (client._errors) the server refused, was unreachable, ...
    │   │   └── WaitError       (client._wait) a job or run not seen reaching a phase
    │   │       ├── WaitTimeout (client._wait) ... before the timeout
    │   │       ├── JobEnded    (client._wait) ... because the job ended in another phase
    │   │       └── RunEnded    (client._wait) ... because the run ended in another phase
    │   └── LauncherGone        (executors.launcher.client) the task launcher is gone
    ├── NotYetHashed            (control.controllers.hashing) a hash being computed: ask again
    ├── MissingMeaning          (spec.reference) a document field with no docstring (a bug)
    ├── ConfigError             a scheduler configuration that cannot be built
    │   └── PluginError         an unknown, duplicate or broken plugin
    ├── IllegalTransition       a lifecycle edge that the transition table does not allow
    └── EngineInvariantError    a bug: the engine reached a state its contracts forbid

Where a class also has a base from outside (``ApiError`` is FastAPI's
``HTTPException``, ``_Refused`` PyYAML's ``MarkedYAMLError``), that base is kept
because a handler or an ``except`` catches it by that base.
"""

from __future__ import annotations


class PhalanxError(Exception):
    """Root of every error phalanx raises on purpose."""


class InvalidInput(PhalanxError):
    """Bad input. The message names the offending field and how to fix it."""

    def __init__(self, message: str, *, field: str | None = None, fix: str | None = None) -> None:
        self.message = message  # without the field and the fix
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


class ContentError(PhalanxError):
    """A file or artifact of a run (or a report) that cannot be read as asked: it is
    missing, or not what was declared. (A path a tenant controls that the server refuses
    to read is ``tenantfs.TenantPathRefused``, an ``InvalidInput``: it names the fix.)"""


class RequestRefused(PhalanxError):
    """A request this process was sent (an API call, a console page, a call to a node
    agent) that it refuses, with what to do instead."""


class RemoteError(PhalanxError):
    """A call to another process (the server, the task launcher) that failed: it could
    not be reached, it is gone, it refused, or it answered nonsense."""


class ConfigError(PhalanxError):
    """A scheduler configuration that cannot be turned into a session."""


class PluginError(ConfigError):
    """An unknown, duplicate or broken plugin or action."""


class IllegalTransition(PhalanxError):
    """A phase change that the lifecycle table forbids."""


class EngineInvariantError(PhalanxError):
    """The engine reached a state its contracts forbid. Always a bug."""
