"""The TorchScript runtime (``python -m phalanx.runtimes.torchscript``) as a real process.

It answers KServe V1 with the model's own outputs, for a model built here and for one
that ``train_torch`` trained on ``prep``'s data; every bad request is refused with JSON
naming the field; a runtime that cannot start exits 2 with one line saying why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from phalanx.runtimes.instances import MAX_INSTANCES
from phalanx.runtimes.torchscript import MAX_BODY, MODEL_FILE

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="PyTorch is not installed (make test and make demo install its CPU build)",
)

#: How long a runtime may take to load torch and its model (a cold start on two cores).
DEADLINE = 60.0
RUNTIME = "phalanx.runtimes.torchscript"


def _torch() -> Any:
    """torch, imported when a test runs (not when the suite is collected: it is slow)."""
    import torch

    return torch


@contextmanager
def _quiet() -> Iterator[None]:
    """TorchScript is deprecated in torch 2.x; it still works, and the tests use it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        yield


@dataclass(frozen=True, slots=True, kw_only=True)
class Runtime:
    """A running runtime: its address and its client."""

    url: str
    client: httpx.Client

    def predict(self, name: str, body: Any) -> httpx.Response:
        """POST ``body`` (bytes as they are, anything else as JSON) to NAME:predict."""
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.client.post(f"{self.url}/v1/models/{name}:predict", content=content)


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PORT", "PHALANX_MODEL_PATH")}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


@contextmanager
def _serving(model_dir: Path, logs: Path, *, name: str) -> Iterator[Runtime]:
    """The runtime serving ``model_dir`` as ``name`` on a free port (``--port 0``), once it
    has said where; stopped at the end."""
    out, err = logs / f"{name}.out", logs / f"{name}.err"
    argv = [sys.executable, "-m", RUNTIME, "--model-dir", str(model_dir), "--port", "0"]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [*argv, "--name", name], stdout=stdout, stderr=stderr, env=_environment()
        )
    try:
        url = _announced(process, out, err)
        with httpx.Client(trust_env=False, timeout=30.0) as client:
            yield Runtime(url=url, client=client)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _announced(process: subprocess.Popen[bytes], out: Path, err: Path) -> str:
    """The address in the runtime's first line; fails with its stderr if it exits first."""
    deadline = time.monotonic() + DEADLINE
    while True:
        found = re.search(r"^serving \S+ at (http://127\.0\.0\.1:\d+) ", out.read_text(), re.M)
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise AssertionError(f"the runtime exited {process.returncode}: {err.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the runtime did not start: {err.read_text()}")
        time.sleep(0.05)


def _tiny(directory: Path) -> Any:
    """A linear map of 3 numbers to 2, saved as ``directory/model.pt`` without a declared
    shape; the module as the runtime loads it."""
    torch = _torch()
    torch.manual_seed(0)
    directory.mkdir(parents=True)
    with _quiet():
        torch.jit.save(torch.jit.script(torch.nn.Linear(3, 2)), str(directory / MODEL_FILE))
        return torch.jit.load(str(directory / MODEL_FILE)).eval()


def _outputs(model: Any, rows: list[list[float]]) -> list[Any]:
    torch = _torch()
    with torch.inference_mode():
        result: list[Any] = model(torch.tensor(rows, dtype=torch.float32)).tolist()
    return result


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Runtime, Any]]:
    """The runtime serving the tiny model as ``tiny``, and the model."""
    base = tmp_path_factory.mktemp("tiny")
    model = _tiny(base / "model")
    with _serving(base / "model", base, name="tiny") as runtime:
        yield runtime, model


def test_it_answers_kserve_v1_with_the_models_own_outputs(tiny: tuple[Runtime, Any]) -> None:
    runtime, model = tiny
    first = runtime.client.get(f"{runtime.url}/healthz")  # loaded before the first answer
    assert (first.status_code, first.json()) == (200, {"ready": True})
    meta = runtime.client.get(f"{runtime.url}/v1/models/tiny")
    assert (meta.status_code, meta.json()) == (200, {"name": "tiny", "ready": True})
    rows = [[0.0, 1.0, 2.0], [-1.5, 0.25, 3], [1e-3, 7, -2]]
    answer = runtime.predict("tiny", {"instances": rows})
    assert answer.status_code == 200, answer.text
    predictions = answer.json()["predictions"]
    assert np.shape(predictions) == (3, 2)
    np.testing.assert_allclose(predictions, _outputs(model, rows), rtol=1e-6, atol=1e-7)
    single = runtime.predict("tiny", {"instances": [rows[1]]}).json()["predictions"]
    np.testing.assert_allclose(single, [predictions[1]], rtol=1e-6, atol=1e-7)  # row by row


def test_unknown_models_routes_and_methods_answer_json(tiny: tuple[Runtime, Any]) -> None:
    runtime, _ = tiny
    for answer in (
        runtime.predict("other", {"instances": [[1, 2, 3]]}),
        runtime.client.get(f"{runtime.url}/v1/models/other"),
    ):
        assert answer.status_code == 404
        assert answer.json()["field"] == "name" and "/v1/models/tiny" in answer.json()["fix"]
    nowhere = runtime.client.get(f"{runtime.url}/v2/models")
    assert nowhere.status_code == 404 and "GET /healthz" in nowhere.json()["fix"]
    wrong_method = runtime.client.post(f"{runtime.url}/v1/models/tiny", content=b"{}")
    assert wrong_method.status_code == 405 and wrong_method.json()["detail"]


#: Bad requests: the body, then the status, the field and a part of the detail it gets
#: (the last but two: a model whose output is not one row per instance, a 500).
BAD: list[tuple[Any, int, str | None, str]] = [
    (b"{not json", 400, "body", "not JSON"),
    (b'{"instances": [[1, 2, 3]]', 400, "body", "not JSON"),
    ([[1, 2, 3]], 400, "body", "a list, not an object"),
    ({"inputs": [[1, 2, 3]]}, 400, "instances", "missing"),
    ({"instances": "1,2,3"}, 400, "instances", "a string, not a list"),
    ({"instances": []}, 400, "instances", "empty"),
    ({"instances": [[1, 2, 3], [4, 5]]}, 400, "instances[1]", "has 2 entries"),
    ({"instances": [[1, 2, 3], 4]}, 400, "instances[1]", "is a number"),
    ({"instances": [[1, "2", 3]]}, 400, "instances[0][1]", "a string, not a number"),
    ({"instances": [[1, 2, None]]}, 400, "instances[0][2]", "null, not a number"),
    ({"instances": [[True, 2, 3]]}, 400, "instances[0][0]", "true, not a number"),
    (b'{"instances": [[1, NaN, 3]]}', 400, "instances[0][1]", "not a finite float32"),
    (b'{"instances": [[1, 2, -Infinity]]}', 400, "instances[0][2]", "not a finite float32"),
    ({"instances": [[1, 2, 1e39]]}, 400, "instances[0][2]", "not a finite float32"),
    ({"instances": [[1, 2]]}, 400, "instances", "of shape [1, 2] were refused by the model"),
    ({"instances": [1, 2]}, 400, "instances", "of shape [2] were refused by the model"),
    ({"instances": [1, 2, 3]}, 500, None, "returned shape [2], not one output per instance"),
    ({"instances": [[0, 0, 0]] * (MAX_INSTANCES + 1)}, 413, "instances", "more than the"),
    (b" " * (MAX_BODY + 1), 413, "body", "over 16 MiB"),
]


def test_every_bad_request_is_refused_naming_its_field(tiny: tuple[Runtime, Any]) -> None:
    runtime, _ = tiny
    for body, status, field, detail in BAD:
        answer = runtime.predict("tiny", body)
        shown = f"{str(body)[:60]} -> {answer.status_code} {answer.text[:300]}"
        assert answer.status_code == status, shown
        refusal = answer.json()
        assert set(refusal) == {"detail", "field", "fix"}, shown
        assert refusal["field"] == field and detail in refusal["detail"], shown
        assert refusal["fix"] and "Traceback" not in answer.text, shown
    assert runtime.client.get(f"{runtime.url}/healthz").status_code == 200  # still serving


@pytest.mark.slow
def test_a_model_trained_by_train_torch_is_served_with_its_declared_shape(tmp_path: Path) -> None:
    data, model_dir, metrics = tmp_path / "data", tmp_path / "model", tmp_path / "metrics.json"
    trained = ["--model", str(model_dir), "--metrics", str(metrics), "--hidden", "8"]
    programs = [
        ["prep", "--out", str(data), "--rows", "400", "--seed", "3"],
        ["train_torch", "--data", str(data), *trained, "--epochs", "60", "--seed", "3"],
    ]
    for program, *args in programs:
        module = f"phalanx.examples.pipelines.{program}"
        ran = subprocess.run(
            [sys.executable, "-m", module, *args],
            capture_output=True,
            text=True,
            check=False,
            env=_environment(),
        )
        assert ran.returncode == 0, ran.stderr
    figures = json.loads(metrics.read_text())
    assert figures["final_loss"] < figures["first_loss"] and figures["train_accuracy"] > 0.6
    assert sorted(p.name for p in model_dir.iterdir()) == [MODEL_FILE]
    with np.load(data / "val.npz") as split:
        rows = split["x"][:5].tolist()
    with _quiet():
        model = _torch().jit.load(str(model_dir / MODEL_FILE)).eval()
    with _serving(model_dir, tmp_path, name="example") as runtime:
        answer = runtime.predict("example", {"instances": rows})
        assert answer.status_code == 200, answer.text
        predictions = answer.json()["predictions"]
        np.testing.assert_allclose(predictions, _outputs(model, rows), rtol=1e-6, atol=1e-7)
        assert all(0.0 <= p <= 1.0 for p in predictions)  # the probability of class 1
        short = runtime.predict("example", {"instances": [row[:5] for row in rows]})
        assert short.status_code == 400 and short.json() == {
            "detail": "instances have shape [5]; the model takes [8]",
            "field": "instances",
            "fix": "send rows of 8 numbers",
        }


def _cannot_start(*args: str, **env: str) -> str:
    """The one line a runtime that cannot start writes; it must exit 2."""
    ran = subprocess.run(
        [sys.executable, "-m", RUNTIME, *args],
        capture_output=True,
        text=True,
        check=False,
        env=_environment(**env),
        timeout=DEADLINE,
    )
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr
    assert ran.stdout == ""
    return ran.stderr


def test_a_missing_model_exits_2_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    line = _cannot_start("--model-dir", str(tmp_path / "none"), "--port", "0")
    assert f"{tmp_path / 'none' / MODEL_FILE} is not there" in line
    assert "fix: give --model-dir (or PHALANX_MODEL_PATH) a directory holding model.pt" in line
    from_env = _cannot_start(PHALANX_MODEL_PATH=str(tmp_path), PORT="0")
    assert f"{tmp_path / MODEL_FILE} is not there" in from_env


def test_no_directory_or_no_port_exits_2_naming_the_setting(tmp_path: Path) -> None:
    assert "--model-dir: no model directory" in _cannot_start("--port", "0")
    line = _cannot_start("--model-dir", str(tmp_path))
    assert "--port: no port; fix: give --port (0 to 65535) or set PORT" in line
    assert "'http' is not a port" in _cannot_start("--model-dir", str(tmp_path), PORT="http")


def test_a_file_that_is_not_torchscript_exits_2(tmp_path: Path) -> None:
    (tmp_path / MODEL_FILE).write_bytes(b"not a zip archive")
    line = _cannot_start("--model-dir", str(tmp_path), "--port", "0")
    assert f"{tmp_path / MODEL_FILE} is not a TorchScript model" in line
    assert "fix: save it with torch.jit.save(torch.jit.script(model), 'model.pt')" in line


def test_without_torch_it_exits_2_saying_so(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no torch in this Python')\n")
    (tmp_path / MODEL_FILE).write_bytes(b"anything")
    path = [str(tmp_path / "shadow"), *filter(None, [os.environ.get("PYTHONPATH")])]
    line = _cannot_start(
        "--model-dir", str(tmp_path), "--port", "0", PYTHONPATH=os.pathsep.join(path)
    )
    assert "torch: torch cannot be imported by" in line and "no torch in this Python" in line
    assert "fix: install torch in this Python" in line
