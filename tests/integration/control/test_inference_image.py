"""An inference predictor in a container image (issue 38): its replicas run in podman
with the model version mounted read-only at ``$PHALANX_MODEL_PATH``; here busybox's
httpd serves the version's files, so what the gateway answers is the model's bytes."""

from __future__ import annotations

from pathlib import Path

from tests.integration.control.serving import role, running_server, wait_for
from tests.integration.control.test_images import PODMAN_CLUSTER
from tests.integration.control.test_inference import inference, ready
from tests.integration.control.test_pipelines import admin

#: SQLite only: container images and their stop are podman's and the executor's.
BACKENDS = ("sqlite",)

#: A "model" of two files: what the replica answers its readiness path and a request.
WRITE = 'mkdir -p model && echo ok > model/healthz && echo "$0" > model/predict'


def test_a_predictor_in_an_image_serves_its_version_read_only(
    busybox_image: str, tmp_path: Path
) -> None:
    with running_server(tmp_path, cluster=PODMAN_CLUSTER) as server:
        api = admin(server)
        trainer = role("trainer", command=["sh", "-c", WRITE, "weights-v1"])
        trainer["model"] = {"name": "files", "path": "model"}
        api.submit("train", "wf", trainer)
        assert api.wait_phase("train", "Succeeded", "Failed")["phase"] == "Succeeded"
        wait_for(lambda: api.get("/api/v1/models"), "files:v1 registered")
        predictor = {
            "name": "main",
            "modelVersion": "files:v1",
            "image": busybox_image,
            # busybox's httpd: it cannot write where it serves from
            "command": 'touch "$PHALANX_MODEL_PATH/x" 2>/dev/null && exit 9; '
            'exec httpd -f -p "127.0.0.1:$PORT" -h "$PHALANX_MODEL_PATH"',
            "resources": {"cpu": "100m", "memory": "64Mi"},
        }
        api.post("/api/v1/inferences", inference("files", predictor))
        ready(api, "files")
        answer = api.http.get("/serve/files/predict")
        assert answer.status_code == 200 and answer.text == "weights-v1\n", answer.text
