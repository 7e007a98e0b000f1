"""The server's secrets key: values sealed under it open only under it; the key file is
made 0600 once, never overwritten, and refused when others could read it."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from phalanx.control.secretbox import KEY_FILE, SecretBox
from phalanx.domain.errors import ContentError, InvalidInput

VALUES = {"AWS_SECRET_ACCESS_KEY": b"hunter2-SECRET", "tls.pem": b"\x00\xffbinary", "empty": b""}


def test_what_is_sealed_opens_to_the_same_values(tmp_path: Path) -> None:
    box = SecretBox.load_or_create(tmp_path / KEY_FILE)
    sealed = box.seal(VALUES)
    assert b"hunter2" not in sealed and b"AWS_SECRET" not in sealed  # names sealed too
    assert box.open(sealed) == VALUES
    assert SecretBox.load_or_create(tmp_path / KEY_FILE).open(sealed) == VALUES  # a restart
    assert box.seal(VALUES) != sealed  # a fresh IV each time


def test_another_key_cannot_open_them_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    sealed = SecretBox.load_or_create(tmp_path / "a" / KEY_FILE).seal(VALUES)
    other = SecretBox.load_or_create(tmp_path / "b" / KEY_FILE)
    with pytest.raises(ContentError) as refused:
        other.open(sealed)
    said = str(refused.value)
    assert "not the one they were sealed with" in said and "fix:" in said
    assert "hunter2" not in said
    with pytest.raises(ContentError):
        other.open(b"not even a token")


def test_the_key_file_is_made_0600_and_kept(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    path = tmp_path / "a" / KEY_FILE
    previous = os.umask(0)
    try:
        SecretBox.load_or_create(path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_bytes()
    SecretBox.load_or_create(path)
    assert path.read_bytes() == key  # never overwritten
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no temporary left


def test_starts_at_once_keep_one_key(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    boxes: list[SecretBox] = []
    threads = [
        threading.Thread(target=lambda: boxes.append(SecretBox.load_or_create(path)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sealed = boxes[0].seal(VALUES)
    assert all(box.open(sealed) == VALUES for box in boxes)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_key_file_others_could_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / KEY_FILE
    SecretBox.load_or_create(path)
    path.chmod(mode)
    with pytest.raises(InvalidInput) as refused:
        SecretBox.load_or_create(path)
    assert refused.value.field == str(path)
    assert f"{mode:04o}" in str(refused.value) and refused.value.fix == f"chmod 600 {path}"


def test_a_key_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.key"
    SecretBox.load_or_create(real)
    link = tmp_path / KEY_FILE
    link.symlink_to(real)
    with pytest.raises(InvalidInput, match="not a regular file"):
        SecretBox.load_or_create(link)
    link.unlink()
    link.mkdir()
    with pytest.raises(InvalidInput, match="not a regular file"):
        SecretBox.load_or_create(link)


def test_a_key_file_without_a_key_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    path.write_bytes(b"hunter2-not-a-key\n")
    path.chmod(0o600)
    with pytest.raises(InvalidInput) as refused:
        SecretBox.load_or_create(path)
    assert "does not hold a secrets key" in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_a_data_dir_that_is_not_there_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot be read or made"):
        SecretBox.load_or_create(tmp_path / "missing" / KEY_FILE)


def test_the_box_never_shows_its_key(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    box = SecretBox.load_or_create(path)
    key = path.read_text().strip()
    assert key not in repr(box) and key not in str(box)
