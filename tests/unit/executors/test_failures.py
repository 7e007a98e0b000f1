"""Why a task could not start: the program lookup and the sentence for each error."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.executors.failures import TOO_BIG, missing_command, start_failure


def _program(path: Path, *, executable: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755 if executable else 0o644)
    return path


def test_a_program_on_the_path_or_at_a_path_is_found(tmp_path: Path) -> None:
    _program(tmp_path / "bin" / "train")
    env = {"PATH": f"/nonexistent:{tmp_path / 'bin'}"}
    assert missing_command(["train", "--epochs", "3"], env=env, cwd=tmp_path) is None
    assert missing_command([str(tmp_path / "bin" / "train")], env={}, cwd=Path("/")) is None
    # A relative path starts in the task's directory, as it will for the task.
    assert missing_command(["bin/train"], env={}, cwd=tmp_path) is None
    # An empty PATH entry is the working directory, as for the shell.
    assert missing_command(["train"], env={"PATH": ":/usr/bin"}, cwd=tmp_path / "bin") is None


def test_a_missing_program_names_itself_the_path_searched_and_the_fix(tmp_path: Path) -> None:
    message = missing_command(["no-such-tool", "x"], env={"PATH": "/a:/b"}, cwd=tmp_path)
    assert message is not None
    assert message.startswith("command not found: 'no-such-tool'")
    assert "PATH (/a:/b)" in message and "give its full path" in message
    relative = missing_command(["./run.sh"], env={}, cwd=tmp_path)
    assert relative is not None and "command not found: './run.sh' does not exist" in relative
    assert f"starts in {tmp_path}" in relative


def test_a_program_that_is_not_executable_or_is_a_directory_says_so(tmp_path: Path) -> None:
    script = _program(tmp_path / "run.sh", executable=False)
    message = missing_command([str(script)], env={}, cwd=tmp_path)
    assert message is not None and message.startswith(f"permission denied: {script}")
    assert "chmod +x" in message
    (tmp_path / "dir").mkdir()
    directory = missing_command(["./dir"], env={}, cwd=tmp_path)
    assert directory is not None and "is a directory, not a program" in directory


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (OSError(errno.E2BIG, "Argument list too long", "/bin/sh"), TOO_BIG),
        (
            OSError(errno.ENAMETOOLONG, "File name too long", "/d/tasks/j/x"),
            "File name too long: /d/tasks/j/x: a file name or path is longer than",
        ),
        (
            OSError(errno.ENOENT, "No such file or directory", "/bin/sh"),
            "No such file or directory: /bin/sh: it must exist on this host",
        ),
        (
            OSError(errno.EACCES, "Permission denied", "/d/tasks/j"),
            "Permission denied: /d/tasks/j: the server's user must be able to write",
        ),
        (
            OSError(errno.ENOSPC, "No space left on device", "/d/tasks/j/t/stdout.log"),
            "No space left on device: /d/tasks/j/t/stdout.log: free space on that file system",
        ),
        (OSError(errno.EMFILE, "Too many open files"), "Too many open files: /work/t"),
        (ValueError("embedded null byte"), "(embedded null byte): remove NUL characters"),
        (
            InvalidInput("the command is empty", field="command", fix="give an argv list"),
            "command: the command is empty; fix: give an argv list",
        ),
        (KeyError("w"), "phalanx could not start it (KeyError: 'w'): a bug, please report it"),
    ],
)
def test_each_start_error_becomes_a_sentence_with_its_cause(
    error: BaseException, expected: str
) -> None:
    assert expected in start_failure(error, workdir=Path("/work/t"))


def test_the_limit_sentence_says_what_to_do() -> None:
    assert "ARG_MAX" in TOO_BIG and TOO_BIG.endswith("pass large values in a file")
