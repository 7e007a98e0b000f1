"""Serving task logs: the tail of a file, or a stream that follows it until the task ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: How often a followed log is checked for new output.
FOLLOW_INTERVAL = 0.2


def log_path(controller: Any, job: str, task: str, stream: str) -> Path:
    """Where the executor writes ``stream`` (stdout or stderr) of ``task``."""
    workdir: Path = controller.core.executor.workdir(job, task)
    return workdir / f"{stream}.log"


class LogStream:
    """One log file, read from the end or followed."""

    def __init__(self, path: Path, live: Callable[[], bool]) -> None:
        self.path = path
        self.live = live

    @staticmethod
    def tail(path: Path, size: int) -> str:
        """The last ``size`` bytes of ``path`` ("" when it does not exist yet)."""
        try:
            with path.open("rb") as handle:
                handle.seek(0, 2)
                end = handle.tell()
                handle.seek(max(0, end - size))
                return handle.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def follow(self, size: int) -> Iterator[bytes]:
        """The last ``size`` bytes, then new output as it comes, until the task has ended
        and everything it wrote has been sent."""
        offset = None
        while True:
            live = self.live()
            try:
                with self.path.open("rb") as handle:
                    if offset is None:
                        handle.seek(0, 2)
                        offset = max(0, handle.tell() - size)
                    handle.seek(offset)
                    chunk = handle.read()
            except FileNotFoundError:
                chunk = b""
            if chunk:
                offset = (offset or 0) + len(chunk)
                yield chunk
            elif not live:
                return
            else:
                time.sleep(FOLLOW_INTERVAL)
