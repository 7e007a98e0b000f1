"""A container image the tests build themselves (nothing can be pulled in CI).

``FROM scratch`` with Debian's static busybox (package ``busybox-static``) and its
applets as links, built once per busybox binary. Tests that need a container runtime
skip with the reason when podman is missing, except under ``PHALANX_REQUIRE_PODMAN=1``
(``.ci/run``), where they fail.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

from phalanx.executors.containers import SCOPE_LABEL, ContainerRuntime, RuntimeKind, detect_runtime
from phalanx.executors.taskgroups import scope_of

#: Debian's static busybox (package busybox-static).
BUSYBOX: Final = Path("/bin/busybox")
#: What the tests' commands use.
APPLETS: Final = (
    "sh", "echo", "sleep", "cat", "env", "id", "dd", "pwd", "ls", "touch", "sort", "true",
    "false", "head", "kill", "test", "[", "rm", "httpd",
)  # fmt: skip
CONTAINERFILE: Final = "FROM scratch\nCOPY bin /bin\n"


def require_podman() -> ContainerRuntime:
    """The host's podman, or a skip (a failure under ``PHALANX_REQUIRE_PODMAN=1``)."""
    runtime = detect_runtime()
    reason = ""
    if runtime is None or runtime.kind is not RuntimeKind.PODMAN:
        reason = "no podman on this host: apt-get install podman runc busybox-static"
    elif not _is_static(BUSYBOX):
        reason = f"no static busybox at {BUSYBOX}: apt-get install busybox-static"
    if reason:
        if os.environ.get("PHALANX_REQUIRE_PODMAN") == "1":
            pytest.fail(f"{reason} (PHALANX_REQUIRE_PODMAN=1)")
        pytest.skip(reason)
    assert runtime is not None
    return runtime


def build_busybox_image(runtime: ContainerRuntime, workdir: Path) -> str:
    """The tag of the busybox image, built in ``workdir`` unless it already exists (the
    tag names a hash of busybox and of the recipe)."""
    recipe = BUSYBOX.read_bytes() + repr((APPLETS, CONTAINERFILE)).encode()
    digest = hashlib.sha256(recipe).hexdigest()[:12]
    tag = f"localhost/phalanx-test-busybox:{digest}"
    if runtime.image_problem(tag) is None:
        return tag
    bin_dir = workdir / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy2(BUSYBOX, bin_dir / "busybox")
    for applet in APPLETS:
        (bin_dir / applet).symlink_to("busybox")
    (workdir / "Containerfile").write_text(CONTAINERFILE)
    built = subprocess.run(
        [
            runtime.client,
            "build",
            "-q",
            "-t",
            tag,
            "-f",
            str(workdir / "Containerfile"),
            str(workdir),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if built.returncode != 0:
        pytest.fail(f"cannot build the test image: {built.stderr.strip()}")
    return tag


def derived_image(base: str, files: dict[str, str], workdir: Path) -> str:
    """The tag of ``base`` with ``files`` (absolute path in the image: text) added,
    built in ``workdir`` unless it already exists (the tag names a hash of both)."""
    recipe = repr((base, sorted(files.items()))).encode()
    tag = f"localhost/phalanx-test-derived:{hashlib.sha256(recipe).hexdigest()[:12]}"
    runtime = require_podman()
    if runtime.image_problem(tag) is None:
        return tag
    context = workdir / "context"
    lines = [f"FROM {base}"]
    for index, (path, text) in enumerate(sorted(files.items())):
        context.mkdir(parents=True, exist_ok=True)
        (context / f"file-{index}").write_text(text)
        lines.append(f"COPY file-{index} {path}")
    (workdir / "Containerfile").write_text("\n".join(lines) + "\n")
    built = subprocess.run(
        [runtime.client, "build", "-q", "-t", tag, "-f", str(workdir / "Containerfile"),
         str(context)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    if built.returncode != 0:
        pytest.fail(f"cannot build the derived test image: {built.stderr.strip()}")
    return tag


def _is_static(path: Path) -> bool:
    """True for a 64-bit little-endian ELF program with no interpreter (PT_INTERP): a
    static binary, which runs in an empty image."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if data[:6] != b"\x7fELF\x02\x01":
        return False
    offset = int.from_bytes(data[0x20:0x28], "little")
    size = int.from_bytes(data[0x36:0x38], "little")
    count = int.from_bytes(data[0x38:0x3A], "little")
    types = (
        int.from_bytes(data[offset + i * size : offset + i * size + 4], "little")
        for i in range(count)
    )
    return 3 not in types  # PT_INTERP


def containers_of(data_dir: Path) -> list[str]:
    """Names of every container labelled with ``data_dir``'s scope, any state."""
    listed = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}", "--filter",
         f"label={SCOPE_LABEL}={scope_of(data_dir)}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return listed.stdout.split()
