"""``Client``: the typed HTTP client of the phalanx API (``/api/v1``).

Guarantees: every verb either returns the typed answer or raises ``ClientError``
(``DocumentError`` for a bad document given to ``apply``, before anything is sent); no
httpx or pydantic exception escapes. Read models ignore fields they do not know, so a
newer server does not break an older client.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from phalanx.client._config import resolve_endpoint
from phalanx.client._errors import ClientError, from_response, from_transport
from phalanx.client._wait import WAIT_INTERVAL, phases_of, wait_for_phase, wait_for_run
from phalanx.spec.diagnostics import document_error, problems_of
from phalanx.spec.secret import SecretDocument
from phalanx.wire.gpus import CardCordonView, CardUncordonView, JobGpusView
from phalanx.wire.priority import PriorityListView
from phalanx.wire.usage import UsageBy, UsageView
from phalanx.wire.views import (
    CacheEntryView,
    DatasetView,
    EventView,
    HistoryView,
    InferenceView,
    JobPage,
    JobSummaryView,
    JobView,
    ModelVersionView,
    ModelView,
    NodeView,
    PipelineView,
    QueueView,
    ReportView,
    RolloutView,
    RunPage,
    RunView,
    SecretView,
    TaskPage,
    TaskView,
    TokenInfoView,
    TokenView,
    TuningView,
    UserView,
    WhyView,
)

if TYPE_CHECKING:
    from phalanx.client._documents import ApplyInput, Kind, PreparedDocument

# Applying documents (``_documents``, ``_unchanged``) needs every document model: those
# load when a document is first applied, so that reading the API stays light.

#: Seconds to wait for an answer (a followed log waits for output without limit).
DEFAULT_TIMEOUT: Final = 10.0
_API: Final = "/api/v1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """One document ``apply`` sent and what the server made of it."""

    kind: Kind
    name: str
    #: ``unchanged``: the server already held this very document (nothing was changed;
    #: never for a Secret, whose values are never read back to compare)
    action: Literal["created", "configured", "unchanged"]
    view: QueueView | JobView | PipelineView | InferenceView | SecretView | DatasetView | TuningView


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """``/healthz``: the server answers and its database does."""

    status: str
    version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportFile:
    """One simulator report as the server serves it: its bytes, media type and the
    Content-Security-Policy it was served under (show it under the same)."""

    name: str
    media_type: str
    content: bytes
    policy: str


class LogChunks(Iterator[str]):
    """The text of a log answer, chunk by chunk. The connection is freed at the end, on
    ``close()``, or on leaving a ``with`` block; a lost connection raises ``ClientError``.
    ``warnings``: the server's notes on output it left out (a task whose log cannot be
    read, or that ``since`` leaves out), one sentence each."""

    def __init__(self, response: httpx.Response, lost: Callable[[Exception], ClientError]) -> None:
        self._response = response
        self._texts = response.iter_text()
        self._lost = lost
        self.warnings = tuple(
            _warning_text(value) for value in response.headers.get_list("warning")
        )

    def __next__(self) -> str:
        try:
            return next(self._texts)
        except StopIteration:
            self.close()
            raise
        except httpx.HTTPError as error:
            self.close()
            raise self._lost(error) from None

    def close(self) -> None:
        """Free the connection (the rest of the log is not read)."""
        self._response.close()

    def __enter__(self) -> LogChunks:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Client:
    """A connection to one phalanx server.

    ``server`` and ``token`` default to ``PHALANX_SERVER`` / ``PHALANX_TOKEN``, then the
    config file (see ``phalanx.client.config_path``). ``transport`` replaces the network
    (``httpx.MockTransport``, ``httpx.ASGITransport``...). Use it as a context manager or
    call ``close``.
    """

    def __init__(
        self,
        server: str | None = None,
        token: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        endpoint = resolve_endpoint(server, token)
        self.server = endpoint.server
        self._server_from = endpoint.server_from
        self._has_token = endpoint.token is not None
        self._timeout = timeout
        url = self._checked_url(self.server)
        headers = {"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {}
        self._http = httpx.Client(
            base_url=url, headers=headers, transport=transport, timeout=timeout
        )

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- documents -----------------------------------------------------------------------

    def apply(self, documents: ApplyInput, *, source: str | None = None) -> list[Applied]:
        """Create or update every Queue, Secret, Dataset, Pipeline and Inference and
        submit every Job of ``documents`` (a path, YAML/JSON text, a mapping, a document,
        or a list); queues first (``queues_first``)."""
        return list(self.apply_each(documents, source=source))

    def apply_each(self, documents: ApplyInput, *, source: str | None = None) -> Iterator[Applied]:
        """``apply`` one document at a time: each is sent when the iterator reaches it.
        Everything is validated before the first is sent."""
        from phalanx.client._documents import prepare_documents  # noqa: PLC0415

        yield from self.apply_prepared(prepare_documents(documents, source=source))

    def apply_prepared(self, documents: Sequence[PreparedDocument]) -> Iterator[Applied]:
        """Send documents checked by ``prepare_documents``, in order, one per step."""
        for document in documents:
            yield self._apply_one(document)

    def _apply_one(self, document: PreparedDocument) -> Applied:
        from phalanx.client._unchanged import differences  # noqa: PLC0415

        headers = {"Content-Type": "application/json"}
        action: Literal["created", "configured"]
        if document.kind == "Job":
            try:
                answer = self._call("POST", "/jobs", content=document.body, headers=headers)
            except ClientError as error:
                if error.status != 409:
                    raise
                return self._job_again(document, error)
            job = _parse(JobView, answer)
            return Applied(kind="Job", name=document.name, action="created", view=job)
        if document.kind == "Pipeline":
            return self._apply_registered(document, "pipelines", PipelineView)
        if document.kind == "Inference":
            return self._apply_registered(document, "inferences", InferenceView)
        if document.kind == "Dataset":
            return self._apply_dataset(document)
        if document.kind == "Tuning":
            return self._apply_tuning(document)
        if document.kind == "Secret":
            created, secret = self._put_secret(document.name, document.body)
            action = "created" if created else "configured"
            return Applied(kind="Secret", name=document.name, action=action, view=secret)
        try:
            answer = self._call("POST", "/queues", content=document.body, headers=headers)
            action = "created"
        except ClientError as error:
            if error.status != 409:
                raise
            held = self.queue(document.name)
            if not differences(document, held.document):
                return Applied(kind="Queue", name=document.name, action="unchanged", view=held)
            path = f"/queues/{_segment(document.name)}"
            answer = self._call("PUT", path, content=document.body, headers=headers)
            action = "configured"
        queue = _parse(QueueView, answer)
        return Applied(kind="Queue", name=document.name, action=action, view=queue)

    def _apply_registered(
        self,
        document: PreparedDocument,
        collection: str,
        shown: type[PipelineView] | type[InferenceView],
    ) -> Applied:
        """Register a pipeline or an inference service: created, configured (replaced)
        or unchanged."""
        from phalanx.client._unchanged import differences  # noqa: PLC0415

        headers = {"Content-Type": "application/json"}
        action: Literal["created", "configured"] = "created"
        path = f"/{collection}/{_segment(document.name)}"
        try:
            answer = self._call("POST", f"/{collection}", content=document.body, headers=headers)
        except ClientError as error:
            if error.status != 409:
                raise
            try:
                held = _parse(shown, self._call("GET", path))
            except ClientError as missing:
                if missing.status == 404:
                    raise error from None
                raise
            if not differences(document, held.document):
                return Applied(
                    kind=document.kind, name=document.name, action="unchanged", view=held
                )
            answer = self._call("PUT", path, content=document.body, headers=headers)
            action = "configured"
        view = _parse(shown, answer)
        return Applied(kind=document.kind, name=document.name, action=action, view=view)

    def _apply_dataset(self, document: PreparedDocument) -> Applied:
        """Create a dataset, or replace the one of its user and name: created, configured
        or unchanged. The dataset looked at is the document's ``spec.user``'s when it names
        one (an admin's for another user), else the caller's, whose name the server gives
        ``spec.user``: a document that names no user is compared without it."""
        from phalanx.client._unchanged import differences, stored_form  # noqa: PLC0415

        headers = {"Content-Type": "application/json"}
        written = json.loads(document.body).get("spec", {})
        owner = written.get("user") if isinstance(written.get("user"), str) else None
        path = f"/datasets/{_segment(document.name)}"
        try:
            answer = self._call("POST", "/datasets", content=document.body, headers=headers)
        except ClientError as error:
            if error.status != 409:
                raise
            try:
                held = self.dataset(document.name, user=owner)
            except ClientError as missing:
                if missing.status == 404:
                    raise error from None
                raise
            stored = held.document
            if owner is None:  # the server gave spec.user the caller's name: not a change
                default = stored_form(document)["spec"]["user"]
                stored = {**stored, "spec": {**stored.get("spec", {}), "user": default}}
            if not differences(document, stored):
                return Applied(kind="Dataset", name=document.name, action="unchanged", view=held)
            answer = self._call("PUT", path, content=document.body, headers=headers)
            view = _parse(DatasetView, answer)
            return Applied(kind="Dataset", name=document.name, action="configured", view=view)
        view = _parse(DatasetView, answer)
        return Applied(kind="Dataset", name=document.name, action="created", view=view)

    def _apply_tuning(self, document: PreparedDocument) -> Applied:
        """Start a tuning: created, or unchanged when the server holds this very
        document; one of that name with another document is refused (a tuning is not
        changed while it runs: delete it, then apply)."""
        from phalanx.client._unchanged import differences  # noqa: PLC0415

        headers = {"Content-Type": "application/json"}
        try:
            answer = self._call("POST", "/tunings", content=document.body, headers=headers)
        except ClientError as error:
            if error.status != 409:
                raise
            held = self.tuning(document.name)
            if differences(document, held.document):
                raise ClientError(
                    f"tuning {document.name!r} exists with another document",
                    status=409,
                    field="metadata.name",
                    fix=f"delete it first (phalanx delete tuning {document.name}), or "
                    "choose another name",
                ) from None
            return Applied(kind="Tuning", name=document.name, action="unchanged", view=held)
        view = _parse(TuningView, answer)
        return Applied(kind="Tuning", name=document.name, action="created", view=view)

    # -- inference services ----------------------------------------------------------------

    def inferences(self) -> list[InferenceView]:
        """The caller's inference services (an admin's: everyone's), by name."""
        return _parse_list(InferenceView, self._call("GET", "/inferences"))

    def inference(self, name: str) -> InferenceView:
        """One inference service, with each predictor's replicas."""
        return _parse(InferenceView, self._call("GET", f"/inferences/{_segment(name)}"))

    def delete_inference(self, name: str) -> None:
        """Delete inference service ``name``: the gateway stops routing to it and its
        replicas are stopped."""
        self._call("DELETE", f"/inferences/{_segment(name)}")

    def rollout(
        self,
        name: str,
        to: str,
        *,
        predictor: str | None = None,
        steps: Sequence[int] | None = None,
        interval: float | str | None = None,
        max_error_rate: float | None = None,
        max_p99: float | str | None = None,
        min_requests: int | None = None,
        ready_timeout: float | str | None = None,
    ) -> RolloutView:
        """Start rolling a predictor of service ``name`` to model version ``to`` (``vN``:
        of the predictor's own model): ``predictor`` (omitted: the only one), ``steps``
        (shares in percent, rising to 100), and the thresholds; durations in seconds or
        as ``30s``, ``5m``. What is not given takes the server's defaults."""
        given = {
            "predictor": predictor,
            "steps": None if steps is None else list(steps),
            "interval": interval,
            "maxErrorRate": max_error_rate,
            "maxP99": max_p99,
            "minRequests": min_requests,
            "readyTimeout": ready_timeout,
        }
        body = {"to": to} | {key: value for key, value in given.items() if value is not None}
        answer = self._call("POST", f"/inferences/{_segment(name)}/rollouts", json=body)
        return _parse(RolloutView, answer)

    def abort_rollout(self, name: str) -> RolloutView:
        """Stop the rollout of service ``name`` under way: it is rolled back."""
        answer = self._call("POST", f"/inferences/{_segment(name)}/rollouts/abort")
        return _parse(RolloutView, answer)

    # -- tunings -----------------------------------------------------------------------------

    def tunings(self) -> list[TuningView]:
        """The caller's tunings (an admin's: everyone's), by name, with their trials."""
        return _parse_list(TuningView, self._call("GET", "/tunings"))

    def tuning(self, name: str) -> TuningView:
        """One tuning: every trial, and the best so far."""
        return _parse(TuningView, self._call("GET", f"/tunings/{_segment(name)}"))

    def stop_tuning(self, name: str) -> TuningView:
        """End tuning ``name`` now; what its trials measured stays."""
        return _parse(TuningView, self._call("POST", f"/tunings/{_segment(name)}/stop"))

    def apply_tuning(self, name: str) -> InferenceView:
        """Write tuning ``name``'s best spec into the service it tuned; the service."""
        return _parse(InferenceView, self._call("POST", f"/tunings/{_segment(name)}/apply"))

    def delete_tuning(self, name: str) -> None:
        """Forget tuning ``name``; replicas of its trials under way are stopped."""
        self._call("DELETE", f"/tunings/{_segment(name)}")

    # -- secrets -----------------------------------------------------------------------------

    def secrets(self) -> list[SecretView]:
        """The caller's secrets (an admin's: everyone's), by user then name: key names
        and sizes, never values."""
        return _parse_list(SecretView, self._call("GET", "/secrets"))

    def secret(self, name: str, user: str | None = None) -> SecretView:
        """The caller's secret ``name`` (an admin: ``user``'s); never its values."""
        path = f"/secrets/{_segment(name)}"
        return _parse(SecretView, self._call("GET", path, params=_whose(user)))

    def create_secret(
        self, name: str, values: Mapping[str, str | bytes], user: str | None = None
    ) -> SecretView:
        """Create the caller's secret ``name`` holding ``values`` (an admin may name
        another ``user``); ``ClientError`` with status 409 when it exists (``put_secret``
        replaces). Checked here first, as ``put_secret``."""
        headers = {"Content-Type": "application/json"}
        body = secret_body(name, values, user)
        return _parse(SecretView, self._call("POST", "/secrets", content=body, headers=headers))

    def put_secret(
        self, name: str, values: Mapping[str, str | bytes], user: str | None = None
    ) -> SecretView:
        """Create the caller's secret ``name`` holding ``values`` (text, or bytes), or
        replace the one of that name; an admin may name another ``user``. Checked here
        first: a bad key raises ``DocumentError`` (naming the key, never a value) before
        anything is sent."""
        return self._put_secret(name, secret_body(name, values, user))[1]

    def delete_secret(self, name: str, user: str | None = None) -> None:
        """Delete the caller's secret ``name`` (an admin: ``user``'s)."""
        self._call("DELETE", f"/secrets/{_segment(name)}", params=_whose(user))

    def _put_secret(self, name: str, body: bytes) -> tuple[bool, SecretView]:
        """POST the Secret document ``body``, or PUT it over the one of that name:
        whether it was created, and its view."""
        headers = {"Content-Type": "application/json"}
        try:
            answer = self._call("POST", "/secrets", content=body, headers=headers)
        except ClientError as error:
            if error.status != 409:
                raise
            path = f"/secrets/{_segment(name)}"
            return False, _parse(SecretView, self._call("PUT", path, content=body, headers=headers))
        return True, _parse(SecretView, answer)

    # -- datasets ----------------------------------------------------------------------------

    def datasets(self) -> list[DatasetView]:
        """The caller's datasets (an admin's: everyone's), by user then name, each with
        its last listing."""
        return _parse_list(DatasetView, self._call("GET", "/datasets"))

    def dataset(self, name: str, user: str | None = None) -> DatasetView:
        """The caller's dataset ``name`` (an admin: ``user``'s): its document and its
        last listing."""
        path = f"/datasets/{_segment(name)}"
        return _parse(DatasetView, self._call("GET", path, params=_whose(user)))

    def refresh_dataset(self, name: str, user: str | None = None) -> DatasetView:
        """Have the caller's dataset ``name`` (an admin: ``user``'s) listed again (its
        data changed): jobs started after the new listing read the new data. The answer
        is the dataset as it is now; the listing happens soon after."""
        path = f"/datasets/{_segment(name)}/refresh"
        return _parse(DatasetView, self._call("POST", path, params=_whose(user)))

    def warm_dataset(
        self, name: str, nodes: Sequence[str] = (), user: str | None = None
    ) -> DatasetView:
        """Have the current listing of the caller's dataset ``name`` (an admin:
        ``user``'s) copied into the caches of ``nodes`` (empty: every node) soon, ahead
        of the jobs that read it. The answer is the dataset as it is now; its ``nodes``
        say how far each got, then and in later reads."""
        path = f"/datasets/{_segment(name)}/warm"
        body = {"nodes": list(nodes)}
        return _parse(DatasetView, self._call("POST", path, params=_whose(user), json=body))

    def delete_dataset(self, name: str, user: str | None = None) -> None:
        """Delete the caller's dataset ``name`` (an admin: ``user``'s); its copies in the
        nodes' caches go when room is needed, as any copy no task reads."""
        self._call("DELETE", f"/datasets/{_segment(name)}", params=_whose(user))

    # -- pipelines and runs ----------------------------------------------------------------

    def pipelines(self) -> list[PipelineView]:
        """Every registered pipeline, by name."""
        return _parse_list(PipelineView, self._call("GET", "/pipelines"))

    def pipeline(self, name: str) -> PipelineView:
        """One registered pipeline with its document."""
        return _parse(PipelineView, self._call("GET", f"/pipelines/{_segment(name)}"))

    def delete_pipeline(self, name: str) -> None:
        """Forget pipeline ``name`` (its owner or an admin): it can no longer be run and
        its schedule fires no more. Its runs, those under way included, are kept and go
        on, each with the document it was started with (as deleting an Argo
        WorkflowTemplate leaves its Workflows alone)."""
        self._call("DELETE", f"/pipelines/{_segment(name)}")

    def run_pipeline(
        self, name: str, params: dict[str, Any] | None = None, *, cache: str = "use"
    ) -> RunView:
        """Start a run of pipeline ``name``; ``params`` by name (text is read by each
        param's type, as ``-p name=value``); ``cache``: use the step cache, ``refresh``
        it (write only) or leave it ``off``. The answer's ``id`` names the run."""
        body = {"params": dict(params or {}), "cache": cache}
        return _parse(RunView, self._call("POST", f"/pipelines/{_segment(name)}/runs", json=body))

    def cache_entries(self, *, pipeline: str | None = None) -> list[CacheEntryView]:
        """Step cache entries, oldest first (of one pipeline)."""
        params = {} if pipeline is None else {"pipeline": pipeline}
        return _parse_list(CacheEntryView, self._call("GET", "/cache", params=params))

    def cache_entry(self, key: str) -> CacheEntryView:
        """One step cache entry, with the document its key hashes."""
        return _parse(CacheEntryView, self._call("GET", f"/cache/{_segment(key)}"))

    def evict_cache(
        self, key: str | None = None, *, pipeline: str | None = None
    ) -> list[CacheEntryView]:
        """Evict the entry ``key``, or every entry of ``pipeline``; the evicted ones."""
        if key is not None:
            return _parse_list(CacheEntryView, self._call("DELETE", f"/cache/{_segment(key)}"))
        params = {"pipeline": pipeline or ""}
        return _parse_list(CacheEntryView, self._call("DELETE", "/cache", params=params))

    def models(self) -> list[ModelView]:
        """Every visible model by name, each with its newest version."""
        return _parse_list(ModelView, self._call("GET", "/models"))

    def model_versions(self, name: str) -> list[ModelVersionView]:
        """Every version of model ``name``, newest first."""
        return _parse_list(ModelVersionView, self._call("GET", f"/models/{_segment(name)}"))

    def model_version(self, name: str, version: int) -> ModelVersionView:
        """Version ``version`` of model ``name``, with its files."""
        path = f"/models/{_segment(name)}/versions/{version}"
        return _parse(ModelVersionView, self._call("GET", path))

    def delete_model(self, name: str, version: int | None = None) -> list[ModelVersionView]:
        """Delete version ``version`` of model ``name`` (None: every version); the deleted."""
        path = f"/models/{_segment(name)}" + ("" if version is None else f"/versions/{version}")
        return _parse_list(ModelVersionView, self._call("DELETE", path))

    def runs(
        self, *, pipeline: str | None = None, phase: str | Sequence[str] | None = None
    ) -> list[RunView]:
        """Every visible run (all pages), oldest first, without their units."""
        return list(self.iter_runs(pipeline=pipeline, phase=phase))

    def iter_runs(
        self,
        *,
        pipeline: str | None = None,
        phase: str | Sequence[str] | None = None,
        page_size: int = 100,
    ) -> Iterator[RunView]:
        """Every visible run matching the filters, oldest first, fetching page by page."""
        params: dict[str, Any] = {"limit": page_size}
        if pipeline is not None:
            params["pipeline"] = pipeline
        if phase is not None:
            params["phase"] = [phase] if isinstance(phase, str) else list(phase)
        for page in self._pages(RunPage, "/runs", params):
            yield from page.items

    def run(self, run_id: str) -> RunView:
        """One run with its units (phase, attempt, job, times, outputs)."""
        return _parse(RunView, self._call("GET", f"/runs/{_segment(run_id)}"))

    def wait_run(
        self,
        run_id: str,
        phase: str | Sequence[str] = ("Succeeded",),
        *,
        timeout: float = 300.0,
        interval: float = WAIT_INTERVAL,
    ) -> RunView:
        """Wait until run ``run_id`` is in ``phase`` (a run phase's name, or several: any
        of them will do) and return its view, with its steps. Raises ``WaitTimeout`` after
        ``timeout`` seconds, ``RunEnded`` at once when the run ended in another phase
        (naming its failed steps and why), ``ClientError`` for a phase that is not a run
        phase or a run that does not exist."""
        wanted = phases_of(phase, "run")
        return wait_for_run(lambda: self.run(run_id), run_id, wanted, timeout, interval=interval)

    def stop_run(self, run_id: str) -> RunView:
        """Stop a run: its running steps' jobs are cancelled, its finally steps run."""
        return _parse(RunView, self._call("POST", f"/runs/{_segment(run_id)}/stop"))

    def resume_run(
        self,
        run_id: str,
        *,
        from_step: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> RunView:
        """A new run linked to ended run ``run_id`` that reuses its successful steps
        before the failed one (or before ``from_step``) and runs the rest; ``params``
        change some of its params. The answer's ``id`` names the new run."""
        body: dict[str, Any] = {"params": params or {}}
        if from_step is not None:
            body["from"] = from_step
        return _parse(RunView, self._call("POST", f"/runs/{_segment(run_id)}/resume", json=body))

    def delete_run(self, run_id: str) -> RunView:
        """Stop an active run, or forget an ended one."""
        return _parse(RunView, self._call("DELETE", f"/runs/{_segment(run_id)}"))

    # -- simulator reports -----------------------------------------------------------------

    def usage(
        self,
        *,
        user: str | None = None,
        queue: str | None = None,
        job: str | None = None,
        since: str | float | None = None,
        until: str | float | None = None,
        by: UsageBy = "job",
    ) -> UsageView:
        """GPU-, CPU- and memory-hours held within ``[since, until)`` (ISO dates, seconds
        since the epoch, or spans ago such as ``7d``), priced, by job, user, queue or
        allocation; a user's own unless an admin asks for another's or everyone's."""
        given = {"user": user, "queue": queue, "job": job, "since": since, "until": until}
        params = {name: str(value) for name, value in given.items() if value is not None}
        return _parse(UsageView, self._call("GET", "/usage", params={**params, "by": by}))

    def priority(self, *, queue: str | None = None, user: str | None = None) -> PriorityListView:
        """The jobs waiting to start, each with its multifactor priority factors, weights
        and their weighted sum (as Slurm's ``sprio``), as of the scheduler's last tick: by
        queue, highest first. A user's own jobs only; an admin's ``user`` picks one user's
        (default everyone's). ``fairshare`` False: the server's scheduler has none."""
        given = {"queue": queue, "user": user}
        params = {name: value for name, value in given.items() if value is not None}
        return _parse(PriorityListView, self._call("GET", "/priority", params=params))

    def reports(self) -> list[ReportView]:
        """The simulator reports the server shares (``phalanx up --reports DIR``), newest
        first; ``ClientError`` 404 with ``field`` ``--reports`` when it shares none."""
        return _parse_list(ReportView, self._call("GET", "/reports"))

    def report(self, name: str) -> ReportFile:
        """One shared report's bytes (HTML, SVG or JSON)."""
        answer = self._call("GET", f"/reports/{_segment(name)}")
        return ReportFile(
            name=name,
            media_type=answer.headers.get("content-type", "application/octet-stream"),
            content=answer.content,
            policy=answer.headers.get("content-security-policy", ""),
        )

    def _job_again(self, document: PreparedDocument, taken: ClientError) -> Applied:
        """A job whose name is taken: ``unchanged`` when it is the caller's own and the
        same document; otherwise ``taken``, or why it cannot be changed in place."""
        from phalanx.client._unchanged import describe, differences  # noqa: PLC0415

        try:
            held = self.job(document.name)
        except ClientError as error:
            if error.status == 404:  # another user's job: its name is all that clashes
                raise taken from None
            raise
        changed = differences(document, held.document or {})
        if not changed:
            return Applied(kind="Job", name=document.name, action="unchanged", view=held)
        name = document.name
        raise ClientError(
            f"{document.where}: job {name} exists and differs in {describe(changed)}; "
            "a job cannot be changed in place",
            status=409,
            field="metadata.name",
            fix=f"delete it and apply again (phalanx delete job {name} --wait), "
            "or give the new job another metadata.name",
        )

    # -- jobs ----------------------------------------------------------------------------

    def iter_jobs(
        self,
        *,
        queue: str | None = None,
        phase: str | Sequence[str] | None = None,
        user: str | None = None,
        page_size: int = 100,
        newest_first: bool = False,
    ) -> Iterator[JobSummaryView]:
        """Every visible job matching the filters, oldest first (or newest first),
        fetching page by page as the iteration goes; each with its task counts by phase,
        not its tasks (``job`` and ``iter_tasks`` read those)."""
        params: dict[str, Any] = {"limit": page_size}
        if newest_first:
            params["order"] = "newest"
        if queue is not None:
            params["queue"] = queue
        if user is not None:
            params["user"] = user
        if phase is not None:
            params["phase"] = [phase] if isinstance(phase, str) else list(phase)
        for page in self._pages(JobPage, "/jobs", params):
            yield from page.items

    def jobs(
        self,
        *,
        queue: str | None = None,
        phase: str | Sequence[str] | None = None,
        user: str | None = None,
    ) -> list[JobSummaryView]:
        """Every visible job matching the filters (all pages), oldest first, each with
        its task counts by phase."""
        return list(self.iter_jobs(queue=queue, phase=phase, user=user))

    def job(self, name: str) -> JobView:
        """One job with its document and its first 1,000 tasks (``tasks_omitted`` says
        how many follow; ``iter_tasks`` reads them all)."""
        return _parse(JobView, self._call("GET", f"/jobs/{_segment(name)}"))

    def iter_tasks(
        self, name: str, *, phase: str | Sequence[str] | None = None, page_size: int = 1000
    ) -> Iterator[TaskView]:
        """Every task of job ``name`` (only those in ``phase`` when given), in order,
        fetching page by page."""
        params: dict[str, Any] = {"limit": page_size}
        if phase is not None:
            params["phase"] = [phase] if isinstance(phase, str) else list(phase)
        for page in self._pages(TaskPage, f"/jobs/{_segment(name)}/tasks", params):
            yield from page.items

    def _pages(self, model: type[P], path: str, params: dict[str, Any]) -> Iterator[P]:
        """Every page of the listing at ``path``, each page's ``next`` sent as ``after``."""
        while True:
            page = _parse(model, self._call("GET", path, params=params))
            yield page
            if page.next is None:
                return
            params = {**params, "after": page.next}

    def tasks(self, name: str, *, phase: str | Sequence[str] | None = None) -> list[TaskView]:
        """Every task of job ``name`` (only those in ``phase`` when given), in order."""
        return list(self.iter_tasks(name, phase=phase))

    def wait(
        self,
        name: str,
        phase: str | Sequence[str] = ("Succeeded",),
        *,
        timeout: float = 300.0,
        interval: float = WAIT_INTERVAL,
    ) -> JobView:
        """Wait until job ``name`` is in ``phase`` (a phase's name, or several: any of
        them will do) and return its view. Raises ``WaitTimeout`` after ``timeout``
        seconds, ``JobEnded`` at once when the job ended in another phase (both name the
        job, its phase and the phases waited for), ``ClientError`` for a phase that is not
        a job phase or a job that does not exist."""
        wanted = phases_of(phase)
        return wait_for_phase(lambda: self.job(name), name, wanted, timeout, interval=interval)

    def cancel(self, name: str) -> JobView:
        """Ask for the job to be cancelled (its tasks are stopped first)."""
        return _parse(JobView, self._call("POST", f"/jobs/{_segment(name)}/cancel"))

    def scale(self, name: str, replicas: int) -> JobView:
        """Set the size asked of the job's elastic role (within its range)."""
        body = {"replicas": replicas}
        return _parse(JobView, self._call("POST", f"/jobs/{_segment(name)}/scale", json=body))

    def delete_job(self, name: str) -> JobView:
        """Remove an ended job; a live one is cancelled, and the server removes it once
        its tasks have stopped (the answer's ``delete_requested``)."""
        return _parse(JobView, self._call("DELETE", f"/jobs/{_segment(name)}"))

    def events(self, name: str) -> list[EventView]:
        """What happened to the job, oldest first."""
        answer = self._call("GET", f"/jobs/{_segment(name)}/events")
        return _parse_list(EventView, answer)

    def why(self, name: str) -> WhyView:
        """The scheduler's latest reason for where the job is."""
        return _parse(WhyView, self._call("GET", f"/jobs/{_segment(name)}/why"))

    def logs(
        self,
        name: str,
        task: str | None = None,
        stream: Literal["stdout", "stderr"] = "stdout",
        follow: bool = False,
        *,
        all_tasks: bool = False,
        tail: int | None = None,
        lines: int | None = None,
        since: float | None = None,
    ) -> LogChunks:
        """A task's output (the job's first task by default) as text chunks; with
        ``all_tasks``, every task's output as whole lines ``TASK | line`` (lines of
        different tasks interleave as they come, never mixed). The request is made now
        (errors raise here); with ``follow`` the chunks keep coming until the job has
        ended. Iterate to the end, or ``close()`` the answer, to free the connection.
        Naming a ``task`` together with ``all_tasks`` raises ``ClientError`` (field
        ``all``) before anything is sent. ``tail``: how many bytes from the end of each
        task's log to start with (None: the server's default, 1 MiB); ``lines``: of those,
        only the last so many lines; ``since`` (seconds): only the output of tasks whose
        current run started within that long (lines carry no time stamps), the others'
        new output only. What the server left out, it says in the answer's ``warnings``.
        A task that started but whose log cannot be read (a server restarted with another
        tasks dir, say) raises ``ClientError`` (404) saying where it was looked for."""
        if all_tasks and task is not None:
            raise ClientError(
                f"task {task!r} and all_tasks ask for one task and for every task",
                field="all",
                fix="leave out task to get every task's output, or all_tasks to get one task's",
            )
        params: dict[str, Any] = {"stream": stream, "follow": follow}
        if task is not None:
            params["task"] = task
        if all_tasks:
            params["all"] = True
        if tail is not None:
            params["tail"] = tail
        if lines is not None:
            params["lines"] = lines
        if since is not None:
            params["since"] = since
        path = f"{_API}/jobs/{_segment(name)}/logs"
        timeout = httpx.Timeout(self._timeout, read=None) if follow else None
        request = self._http.build_request("GET", path, params=params, timeout=timeout)
        response = self._send(request, stream=True)
        return LogChunks(
            response, lambda error: from_transport(error, self.server, self._server_from)
        )

    # -- queues --------------------------------------------------------------------------

    def queues(self) -> list[QueueView]:
        """Every queue, by name, with quotas, allocation and job counts."""
        return _parse_list(QueueView, self._call("GET", "/queues"))

    def queue(self, name: str) -> QueueView:
        """One queue."""
        return _parse(QueueView, self._call("GET", f"/queues/{_segment(name)}"))

    def delete_queue(self, name: str) -> None:
        """Delete a queue that has no child queues and no live jobs (admins)."""
        self._call("DELETE", f"/queues/{_segment(name)}")

    # -- nodes ---------------------------------------------------------------------------

    def nodes(self) -> list[NodeView]:
        """Every node, in the cluster's order, with per-GPU allocation."""
        return _parse_list(NodeView, self._call("GET", "/nodes"))

    def node(self, name: str) -> NodeView:
        """One node."""
        return _parse(NodeView, self._call("GET", f"/nodes/{_segment(name)}"))

    def cordon(self, name: str) -> NodeView:
        """No new tasks go to the node; running ones stay (admins)."""
        return _parse(NodeView, self._call("POST", f"/nodes/{_segment(name)}/cordon"))

    def uncordon(self, name: str) -> NodeView:
        """The node takes new tasks again (admins)."""
        return _parse(NodeView, self._call("POST", f"/nodes/{_segment(name)}/uncordon"))

    def drain(self, name: str) -> NodeView:
        """Cordon the node and move its tasks elsewhere (admins)."""
        return _parse(NodeView, self._call("POST", f"/nodes/{_segment(name)}/drain"))

    def cordon_gpu(self, node: str, index: int, reason: str | None = None) -> CardCordonView:
        """No new task is given card ``index`` of the node; its tasks go on (admins)."""
        body = None if reason is None else {"reason": reason}
        path = f"/nodes/{_segment(node)}/gpus/{int(index)}/cordon"
        return _parse(CardCordonView, self._call("POST", path, json=body))

    def uncordon_gpu(self, node: str, index: int) -> CardUncordonView:
        """Card ``index`` of the node takes work again (admins)."""
        path = f"/nodes/{_segment(node)}/gpus/{int(index)}/uncordon"
        return _parse(CardUncordonView, self._call("POST", path))

    def job_gpus(self, name: str) -> JobGpusView:
        """What the job did with its GPUs: over its life, minute by minute, each task's
        latest reading, and since when its cards sit idle (its queue's idleGpus)."""
        return _parse(JobGpusView, self._call("GET", f"/jobs/{_segment(name)}/gpus"))

    # -- users and the server ------------------------------------------------------------

    def users(self) -> list[UserView]:
        """Every user (admins)."""
        return _parse_list(UserView, self._call("GET", "/users"))

    def create_user(
        self,
        name: str,
        role: Literal["admin", "user"] = "user",
        *,
        account: str | None = None,
        default_queue: str | None = None,
    ) -> TokenView:
        """Create a user; the answer holds their first token, shown only now, and the uid
        their tasks run as (admins). ``account`` maps them to an existing Unix account;
        ``default_queue`` is where their jobs that name no queue go (an existing leaf
        queue; None: the queue named ``default``)."""
        body: dict[str, str] = {"name": name, "role": role}
        if account is not None:
            body["account"] = account
        if default_queue is not None:
            body["default_queue"] = default_queue
        return _parse(TokenView, self._call("POST", "/users", json=body))

    def set_default_queue(self, user: str, queue: str | None) -> UserView:
        """Send ``user``'s jobs that name no queue to ``queue`` from now on (an existing
        leaf queue they may submit to; None: back to the queue named ``default``); their
        jobs already submitted stay where they are (admins)."""
        body = {"default_queue": queue}
        return _parse(UserView, self._call("PATCH", f"/users/{_segment(user)}", json=body))

    def create_token(
        self, user: str, label: str = "", *, expires: float | str | None = None
    ) -> TokenView:
        """A new token for ``user`` (admins for anyone, users for themselves); its secret
        is in this answer only. ``expires``: how long it stays valid, in seconds or as
        ``"30d"``, ``"12h"``, ``"1h30m"`` (None: until revoked)."""
        body: dict[str, Any] = {"label": label}
        if expires is not None:
            body["expires"] = expires
        answer = self._call("POST", f"/users/{_segment(user)}/tokens", json=body)
        return _parse(TokenView, answer)

    def tokens(self, user: str | None = None) -> list[TokenInfoView]:
        """``user``'s tokens (default: the caller's), oldest first, without secrets
        (admins for anyone, users for themselves)."""
        name = self.whoami().name if user is None else user
        answer = self._call("GET", f"/users/{_segment(name)}/tokens")
        return _parse_list(TokenInfoView, answer)

    def revoke_token(self, token_id: int) -> None:
        """Revoke one token by id (your own; admins: anyone's). Revoking the token this
        client uses makes its next request fail with 401."""
        self._call("DELETE", f"/tokens/{token_id}")

    def whoami(self) -> UserView:
        """The user the token belongs to, with their default queue."""
        return _parse(UserView, self._call("GET", "/users/me"))

    def health(self) -> Health:
        """The server's health (needs no token)."""
        answer = self._send(self._http.build_request("GET", "/healthz"))
        body = _json(answer)
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise _nonsense(answer, "a health report")
        return Health(status=body["status"], version=str(body.get("version", "")))

    def history(self, *, since: float | None = None) -> HistoryView:
        """The server's own recent metrics in time buckets (needs an admin's token or the
        metrics token); ``since``: only buckets starting at or after that epoch time."""
        params = {} if since is None else {"since": since}
        return _parse(HistoryView, self._call("GET", "/system/history", params=params))

    def metrics_text(self) -> str:
        """The Prometheus text exposition of ``/metrics`` (needs an admin's token or the
        metrics token)."""
        return self._send(self._http.build_request("GET", "/metrics")).text

    # -- plumbing ------------------------------------------------------------------------

    def _call(self, method: str, path: str, **options: Any) -> httpx.Response:
        return self._send(self._http.build_request(method, _API + path, **options))

    def _send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        try:
            response = self._http.send(request, stream=stream)
            if response.status_code >= 400:
                response.read()
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise from_transport(error, self.server, self._server_from) from None
        if response.status_code >= 400:
            response.close()
            raise from_response(response, has_token=self._has_token)
        return response

    def _checked_url(self, server: str) -> httpx.URL:
        try:
            url = httpx.URL(server)
        except (httpx.InvalidURL, TypeError):
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise from_transport(httpx.InvalidURL(server), server, self._server_from)
        return url


def _warning_text(header: str) -> str:
    """The text of an HTTP ``Warning`` header (``299 - "text"``, as the server writes
    them: quotes and backslashes escaped, other than ASCII as ``\\xNN``, ``\\uNNNN``), or
    the header as it is when not of that form."""
    code, _, rest = header.partition(" - ")
    if not code.strip().isdigit() or len(rest) < 2 or rest[0] != '"' or rest[-1] != '"':
        return header
    return _ESCAPE.sub(_unescape, rest[1:-1])


_ESCAPE: Final = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)")


def _unescape(match: re.Match[str]) -> str:
    escaped = match.group(1)
    return chr(int(escaped[1:], 16)) if len(escaped) > 1 else escaped


def _segment(name: str) -> str:
    return quote(name, safe="")


def _whose(user: str | None) -> dict[str, str]:
    return {} if user is None else {"user": user}


def secret_body(name: str, values: Mapping[str, str | bytes], user: str | None) -> bytes:
    """The JSON of a Secret document named ``name`` holding ``values`` (text in
    ``stringData``, bytes in ``data``) of ``user`` (None: the caller), validated here;
    ``DocumentError`` (naming the field, never showing a value) when it is not valid."""
    spec: dict[str, object] = {
        "stringData": {k: v for k, v in values.items() if isinstance(v, str)},
        "data": {
            k: base64.b64encode(v).decode("ascii")
            for k, v in values.items()
            if not isinstance(v, str)
        },
    }
    if user is not None:
        spec["user"] = user
    raw = {"apiVersion": "phalanx/v1", "kind": "Secret", "metadata": {"name": name}, "spec": spec}
    try:
        SecretDocument.model_validate(raw)
    except ValidationError as error:
        raise document_error(f"secret {name[:63]!r}", problems_of(error)) from None
    return json.dumps(raw).encode()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _nonsense(response: httpx.Response, what: str) -> ClientError:
    return ClientError(
        f"{response.request.url} answered something that is not {what}",
        status=response.status_code,
        fix="check that the server URL points at a phalanx server of this version",
    )


M = TypeVar("M", bound=BaseModel)
P = TypeVar("P", JobPage, RunPage, TaskPage)


def _parse(model: type[M], response: httpx.Response) -> M:
    try:
        return model.model_validate_json(response.content)
    except ValidationError:
        raise _nonsense(response, f"a {model.__name__}") from None


def _parse_list(model: type[M], response: httpx.Response) -> list[M]:
    try:
        return TypeAdapter(list[model]).validate_json(response.content)  # type: ignore[valid-type]
    except ValidationError:
        raise _nonsense(response, f"a list of {model.__name__}") from None
