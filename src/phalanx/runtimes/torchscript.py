"""A KServe V1 inference server for a TorchScript model: what an Inference predictor runs.

    python -m phalanx.runtimes.torchscript [--model-dir DIR] [--port N] [--host H] [--name NAME]

``--model-dir`` defaults to ``$PHALANX_MODEL_PATH`` (where a replica finds its model
version), ``--port`` to ``$PORT`` (0: any free port), ``--host`` to ``$PHALANX_HOST`` (its node's address) or 127.0.0.1, and
``--name`` to ``model``. It loads ``DIR/model.pt`` (a file ``torch.jit.save`` wrote) in
eval mode, on the GPU when torch sees one, before it answers anything; then it prints
``serving NAME at http://HOST:PORT ...`` as one line on stdout and answers:

- ``GET /healthz``: 200 ``{"ready": true}``, from the first answer on;
- ``GET /v1/models/NAME``: 200 ``{"name": NAME, "ready": true}``;
- ``POST /v1/models/NAME:predict`` with ``{"instances": [...]}``: 200
  ``{"predictions": [...]}``. The instances (numbers, or equally shaped nested lists of
  numbers) are batched into one float32 tensor, run through the model once under
  ``torch.inference_mode()``, and the output's rows come back in the instances' order.

Guarantees:

- Every answer is JSON; every refusal is ``{"detail", "field", "fix"}`` and never holds
  a traceback. Bad instances (a body that is not a JSON object, no ``instances``, not a
  list, empty, ragged, not finite numbers, beyond float32's range, a shape the model
  refuses) get 400 naming the field, e.g. ``instances[3][1]``; they are checked before
  torch sees them (``phalanx.runtimes.instances``). More than 10,000 instances, or a
  body over 16 MiB, get 413; a model name other than NAME gets 404; a model that fails
  on well-formed instances gets 500 (503 when out of memory).
- When ``model.pt`` holds the extra file ``phalanx.json`` with ``{"instance_shape":
  [K, ...]}`` (``phalanx.examples.pipelines.train_torch`` writes one), instances of
  another shape are refused before the model runs, naming the shape it takes.
- When it cannot start (torch missing, no model directory or port, ``model.pt`` missing
  or not TorchScript, its ``phalanx.json`` malformed, the address taken) it exits 2 with
  one line on stderr naming the file or setting and the fix.
- ``$OMP_NUM_THREADS``, a positive integer, sets torch's intra-op threads; otherwise
  torch's own default stands.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from phalanx.domain.errors import InvalidInput
from phalanx.runtimes.instances import (
    MAX_INSTANCES,
    Batch,
    Refusal,
    bad,
    parse_body,
    shape_text,
)

#: The file of the model directory the server loads.
MODEL_FILE: Final = "model.pt"
#: The extra file of ``model.pt`` that may declare the shape of one instance.
METADATA_FILE: Final = "phalanx.json"
#: The largest request body (more: 413).
MAX_BODY: Final = 16 * 1024 * 1024
#: TorchScript works but is deprecated in torch 2.x; the warning is no news to a replica's log.
_DEPRECATED: Final = r"`torch\.jit\.\w+` is deprecated"
_ROUTES: Final = "GET /healthz, GET /v1/models/NAME and POST /v1/models/NAME:predict"


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    """A loaded model: the module (in eval mode, on ``device``), torch, the name it
    answers to and the instance shape it declares (None: not declared)."""

    name: str
    module: Any
    torch: Any
    device: str
    instance_shape: tuple[int, ...] | None


def predict(served: Served, batch: Batch) -> Response | Refusal:
    """The model's predictions for ``batch``, or the refusal saying why there are none."""
    torch = served.torch
    instance = batch.shape[1:]
    if served.instance_shape is not None and instance != served.instance_shape:
        return bad(
            "instances",
            f"have shape {list(instance)}; the model takes {list(served.instance_shape)}",
            f"send {shape_text(served.instance_shape)}",
        )
    with torch.inference_mode():
        try:
            inputs = torch.tensor(batch.values, dtype=torch.float32, device=served.device)
            output = served.module(inputs.reshape(batch.shape))
        except torch.cuda.OutOfMemoryError:  # torch.OutOfMemoryError, by its older name
            return Refusal(
                status=503,
                detail=f"the model ran out of memory on {batch.shape[0]} instances",
                field="instances",
                fix="send fewer instances per request",
            )
        except RuntimeError as error:  # TorchScript reports a shape it cannot take so
            return bad(
                "instances",
                f"of shape {list(batch.shape)} were refused by the model: {_last_line(error)}",
                "send instances of the shape the model was trained on",
            )
        except Exception as error:  # a model's own bug: reported, never as a traceback
            return _failed(f"the model failed: {type(error).__name__}: {_last_line(error)}")
        if (
            not isinstance(output, torch.Tensor)
            or output.dim() == 0
            or len(output) != batch.shape[0]
        ):
            got = (
                f"shape {list(output.shape)}"
                if isinstance(output, torch.Tensor)
                else type(output).__name__
            )
            return _failed(f"the model returned {got}, not one output per instance")
        predictions = output.cpu().tolist()
    try:
        content = json.dumps({"predictions": predictions}, allow_nan=False)
    except ValueError:
        return _failed("the model returned NaN or infinity")
    return Response(content, media_type="application/json")


def _failed(detail: str) -> Refusal:
    return Refusal(
        status=500, detail=detail, field=None, fix="check the model with these instances offline"
    )


def _last_line(error: BaseException) -> str:
    """The last line of an error's message: TorchScript puts its own traceback above it."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    last = lines[-1] if lines else type(error).__name__
    return last.removeprefix("RuntimeError: ")[:300]


def build_app(served: Served) -> Starlette:
    """The HTTP face of ``served``: the routes of the module's docstring."""

    async def healthz(_: Request) -> Response:
        return JSONResponse({"ready": True})

    async def metadata(request: Request) -> Response:
        refusal = _unknown(request, served.name)
        return _answer(refusal) if refusal else JSONResponse({"name": served.name, "ready": True})

    async def infer(request: Request) -> Response:
        refusal = _unknown(request, served.name)
        if refusal is not None:
            return _answer(refusal)
        raw = await _read_body(request)
        batch = raw if isinstance(raw, Refusal) else parse_body(raw)
        if isinstance(batch, Refusal):
            return _answer(batch)
        answer = await run_in_threadpool(predict, served, batch)
        return _answer(answer) if isinstance(answer, Refusal) else answer

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v1/models/{name}:predict", infer, methods=["POST"]),
        Route("/v1/models/{name}", metadata, methods=["GET"]),
    ]
    handlers = {HTTPException: _http_error, Exception: _crashed}
    return Starlette(routes=routes, exception_handlers=handlers)


def _unknown(request: Request, name: str) -> Refusal | None:
    asked = str(request.path_params["name"])
    if asked == name:
        return None
    return Refusal(
        status=404,
        detail=f"no model named {asked[:100]!r} here",
        field="name",
        fix=f"ask for /v1/models/{name}",
    )


async def _read_body(request: Request) -> bytes | Refusal:
    too_large = Refusal(
        status=413,
        detail=f"the body is over {MAX_BODY // 2**20} MiB",
        field="body",
        fix=f"send at most {MAX_INSTANCES} instances, in several requests",
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _http_error(_: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    body = {"detail": error.detail, "field": None, "fix": f"the routes are {_ROUTES}"}
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


async def _crashed(_: Request, error: Exception) -> Response:
    return _answer(_failed(f"the server failed: {type(error).__name__}"))


def _answer(refusal: Refusal) -> Response:
    return JSONResponse(refusal.body(), status_code=refusal.status)


def load(directory: Path, *, name: str) -> Served:
    """``directory``'s model.pt, loaded and in eval mode. Raises ``InvalidInput`` naming
    the file (or torch) and the fix when it cannot be."""
    path = directory / MODEL_FILE
    if not path.is_file():
        raise InvalidInput(
            f"{path} is not there" if not path.exists() else f"{path} is not a file",
            field=MODEL_FILE,
            fix="give --model-dir (or PHALANX_MODEL_PATH) a directory holding model.pt, "
            "a file torch.jit.save wrote",
        )
    torch = _import_torch()
    threads = os.environ.get("OMP_NUM_THREADS", "").strip()
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    extra = {METADATA_FILE: ""}
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_DEPRECATED, category=DeprecationWarning)
            module = torch.jit.load(str(path), map_location=device, _extra_files=extra)
    except Exception as error:  # torch says RuntimeError, ValueError or OSError
        raise InvalidInput(
            f"{path} is not a TorchScript model ({_last_line(error)[:160]})",
            field=MODEL_FILE,
            fix="save it with torch.jit.save(torch.jit.script(model), 'model.pt')",
        ) from None
    module.eval()
    shape = _declared_shape(extra[METADATA_FILE], path)
    return Served(name=name, module=module, torch=torch, device=device, instance_shape=shape)


def _import_torch() -> Any:
    try:
        import torch  # noqa: PLC0415  # heavy and optional: only this runtime needs it
    except ImportError as error:
        raise InvalidInput(
            f"torch cannot be imported by {sys.executable} ({error})",
            field="torch",
            fix="install torch in this Python (pip install torch), or run the runtime "
            "with a Python that has it",
        ) from None
    return torch


def _declared_shape(text: str | bytes, path: Path) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        shape = json.loads(text)["instance_shape"]
    except (ValueError, TypeError, KeyError):
        shape = None
    if not isinstance(shape, list) or not all(type(n) is int and n > 0 for n in shape):
        raise InvalidInput(
            f"{path}'s extra file {METADATA_FILE} has no instance_shape of positive integers",
            field=METADATA_FILE,
            fix='write {"instance_shape": [K]} there (K numbers per row), or leave it out',
        )
    return tuple(shape)


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        raise InvalidInput(
            f"cannot listen on {host}:{port} ({error.strerror or error})",
            field="--port",
            fix="give a free port (0: any), and a host this machine has",
        ) from None
    return sock


def _settings(args: argparse.Namespace) -> tuple[Path, int]:
    directory = args.model_dir or os.environ.get("PHALANX_MODEL_PATH", "")
    if not directory:
        raise InvalidInput(
            "no model directory",
            field="--model-dir",
            fix="give --model-dir or set PHALANX_MODEL_PATH",
        )
    port = args.port if args.port is not None else os.environ.get("PORT", "")
    if not (port.isdigit() and int(port) <= 65535):
        raise InvalidInput(
            f"{port!r} is not a port" if port else "no port",
            field="--port",
            fix="give --port (0 to 65535) or set PORT",
        )
    return Path(directory), int(port)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT (uvicorn's graceful shutdown, then the signal's own
    exit status); 2 when the server cannot start."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model-dir", help="holds model.pt (default: $PHALANX_MODEL_PATH)")
    parser.add_argument("--port", help="the port to serve on (default: $PORT; 0: any)")
    parser.add_argument(
        "--host",
        default=os.environ.get("PHALANX_HOST", "127.0.0.1"),
        help="the address to serve on (default: $PHALANX_HOST, its node's, or 127.0.0.1)",
    )
    parser.add_argument("--name", default="model", help="the model's name in the URLs")
    args = parser.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):  # each line reaches the replica's log
        sys.stdout.reconfigure(line_buffering=True)
    try:
        directory, port = _settings(args)
        served = load(directory, name=args.name)
        sock = _listen(args.host, port)
    except InvalidInput as error:
        print(f"phalanx.runtimes.torchscript: {error}", file=sys.stderr)
        return 2
    where = sock.getsockname()
    print(
        f"serving {args.name} at http://{args.host}:{where[1]} "
        f"from {directory / MODEL_FILE} on {served.device}",
        flush=True,
    )
    config = uvicorn.Config(build_app(served), lifespan="off", log_level="info")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
