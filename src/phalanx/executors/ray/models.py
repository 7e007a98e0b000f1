"""Model versions on the nodes of a Ray cluster, for the server's model fetcher and
registrar: ``NodeModels``.

On a Ray cluster the server's host runs no task, so a version a task reads is copied
out on the task's node by its agent just before the start (``agent``), from the model
store every node reaches, and a model a task wrote is read on its node by its agent.

Guarantees:
- ``ensure`` reads the version's manifest from the store (verified against its
  digest): a job is taken in only for versions its nodes will find;
- ``collect`` removes, on every node, the versions no longer kept, or reports that it
  could not (a node without an agent, or copying a version now), to be asked again;
- ``intake`` runs on the node the task ran on, as its user would read the directory,
  and raises what the store's intake raises there (``InvalidInput``, ``ContentError``,
  ``OSError``), or ``ContentError`` when that node's agent cannot be reached.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.ray.cluster import RayCluster
from phalanx.models.manifest import Manifest
from phalanx.models.store import ModelStore
from phalanx.tenantfs import Limits

#: How long ``collect`` waits for the agents' answers.
COLLECT_TIMEOUT: Final = 60.0


class NodeModels:
    """See the module docstring."""

    def __init__(self, cluster: RayCluster) -> None:
        self._cluster = cluster

    def ensure(self, store: ModelStore, digest: str) -> None:
        """Check that ``store`` holds version ``digest`` whole (its manifest verified);
        raises what ``ModelStore.manifest`` raises."""
        store.manifest(digest)

    def collect(self, keep: Iterable[str]) -> int | None:
        """Remove every node's copies of the versions not in ``keep``: how many went, or
        None when some node did not (ask again later)."""
        nodes = [node.name for node in self._cluster.state.nodes]
        answers = self._cluster.ask(nodes, "collect_models", sorted(keep), timeout=COLLECT_TIMEOUT)
        if len(answers) < len(nodes) or any(found is None for found in answers.values()):
            return None
        return sum(int(found) for found in answers.values())

    def intake(
        self,
        node: str,
        job: str,
        task: str,
        path: str,
        *,
        identity: TaskIdentity | None,
        limits: Limits,
    ) -> Manifest:
        """The directory ``path`` of ``task`` of ``job``, written on ``node``, copied into
        the model store by that node's agent (``NodeAgent.intake``); its manifest."""
        import ray  # noqa: PLC0415

        try:
            call = self._cluster.agent(node).intake.remote(job, task, path, identity, limits)
        except KeyError:
            raise ContentError(
                f"node {node}, where the task ran, has no agent now: its files cannot be "
                "read; fix: run the job again once the node is back"
            ) from None
        try:
            manifest: Manifest = ray.get(call, timeout=limits.seconds + COLLECT_TIMEOUT)
        except ray.exceptions.RayTaskError as error:
            cause = error.cause
            if isinstance(cause, InvalidInput | ContentError | OSError):
                raise cause from None
            raise ContentError(f"the agent of {node} could not read it: {cause!r}") from None
        except ray.exceptions.RayError as error:
            raise ContentError(f"the agent of {node} did not answer: {error}") from None
        return manifest
