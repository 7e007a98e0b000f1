"""``/ui/submit``: paste a Job document, send it, land on its page.

The document is checked as ``phalanx apply`` checks a file (``prepare_text``: the same
messages, with the line and the field), then sent through the client; a refusal of the
API (a taken name, a queue that does not admit the visitor) is shown the same way. The
text is never taken for a path. Only Job documents are submitted here.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from phalanx.client import ClientError, DocumentError, prepare_text
from phalanx.web.console import console_of
from phalanx.web.session import ROOT, Signed, SignedForm, Visitor

router = APIRouter()

#: What the form says its text is, in messages ("the form document 1 (Job x), line 4: ...").
SOURCE: Final = "the form"

EXAMPLE: Final = """\
apiVersion: phalanx/v1
kind: Job
metadata:
  name: hello
spec:
  queue: default
  roles:
  - name: worker
    replicas: 1
    resources: {cpu: 1, memory: 1Gi}
    command: ["python", "-c", "print('hello from phalanx')"]
"""


def _page(
    request: Request, visitor: Visitor, *, text: str, problem: dict[str, Any] | None, status: int
) -> Response:
    return console_of(request).templates.TemplateResponse(
        request,
        "submit.html",
        {
            "user": visitor.user,
            "csrf": visitor.csrf,
            "page": "submit",
            "text": text,
            "problem": problem,
        },
        status_code=status,
    )


@router.get("/submit")
def submit_page(request: Request, visitor: Signed) -> Response:
    """The form, with an example to edit."""
    return _page(request, visitor, text=EXAMPLE, problem=None, status=200)


@router.post("/submit")
def submit(request: Request, form: SignedForm, visitor: Signed) -> Response:
    """Check and send the document; its job's page, or the form with the problem."""
    text = form.get("document", "")
    try:
        documents = prepare_text(text, source=SOURCE)
        kinds = [document.kind for document in documents]
        if kinds != ["Job"]:
            raise DocumentError(
                f"{SOURCE} holds {', '.join(kinds)} documents",
                field="kind",
                fix="paste one Job document here; apply queues and pipelines with "
                "'phalanx apply -f FILE'",
            )
        [applied] = visitor.client.apply_prepared(documents)
    except DocumentError as error:
        problem = {"message": str(error), "field": error.field, "fix": error.fix}
        return _page(request, visitor, text=text, problem=problem, status=422)
    except ClientError as error:
        problem = {"message": error.message(), "field": error.field, "fix": error.fix}
        status = error.status if error.status and error.status < 500 else 502
        return _page(request, visitor, text=text, problem=problem, status=status)
    return RedirectResponse(f"{ROOT}/jobs/{quote(applied.name, safe='')}", status_code=303)
