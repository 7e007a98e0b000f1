"""Paths a tenant controls: every plant a hostile task can leave is refused with why,
and nothing of its target is read."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

import pytest

from phalanx.tenantfs import (
    Limits,
    Place,
    Reader,
    TenantPathMissing,
    TenantPathRefused,
    check_mount_source,
    hash_path,
    make_dirs,
    read_file,
    read_tail,
    read_tree,
    stat_of,
)

SECRET = b"hf_secret_of_another_tenant"
LIMITS = Limits(max_bytes=1 << 20)
#: A tenant's uid that owns nothing here (files below are made by the test's own uid).
STRANGER = Reader(uid=70_001, gids=(70_001,))


@pytest.fixture
def yard(tmp_path: Path) -> Path:
    """A tasks' directory, with a secret file beside it that the plants point at."""
    (tmp_path / "secret").write_bytes(SECRET)
    (tmp_path / "secret").chmod(0o600)
    yard = tmp_path / "yard"
    yard.mkdir()
    return yard


def _place(yard: Path, name: str) -> Place:
    return Place(yard, name)


def test_a_regular_file_is_read(yard: Path) -> None:
    (yard / "out").write_bytes(b"42")
    assert read_file(_place(yard, "out"), reader=None, limits=LIMITS) == b"42"


@pytest.mark.parametrize("target", ["../secret", "/etc/passwd"])
def test_a_link_as_the_file_is_refused_naming_its_target(yard: Path, target: str) -> None:
    (yard / "out").symlink_to(target)
    with pytest.raises(TenantPathRefused, match=f"a symbolic link to {target}") as caught:
        read_file(_place(yard, "out"), reader=None, limits=LIMITS)
    assert SECRET.decode() not in str(caught.value)


def test_a_link_on_the_way_is_refused(yard: Path, tmp_path: Path) -> None:
    (yard / "step").symlink_to(tmp_path)
    with pytest.raises(TenantPathRefused, match="step is a symbolic link"):
        read_file(_place(yard, "step/secret"), reader=None, limits=LIMITS)


def test_a_fifo_is_refused_at_once(yard: Path) -> None:
    os.mkfifo(yard / "pipe")  # opened for reading, it would block until a writer came
    with pytest.raises(TenantPathRefused, match="a FIFO"):
        read_file(_place(yard, "pipe"), reader=None, limits=LIMITS)
    with pytest.raises(TenantPathRefused, match="a FIFO"):
        hash_path(_place(yard, "pipe"), reader=None, limits=LIMITS)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes device nodes")
def test_a_device_node_is_refused(yard: Path) -> None:
    os.mknod(yard / "zero", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    with pytest.raises(TenantPathRefused, match="a character device"):
        read_file(_place(yard, "zero"), reader=None, limits=LIMITS)


def test_a_directory_where_a_file_belongs_is_refused(yard: Path) -> None:
    (yard / "out").mkdir()
    with pytest.raises(TenantPathRefused, match="a directory, not a file"):
        read_file(_place(yard, "out"), reader=None, limits=LIMITS)


def test_a_file_over_the_cap_is_refused_before_a_byte_is_read(yard: Path) -> None:
    with (yard / "big").open("wb") as big:
        big.truncate(100 * 2**20)  # 100 MiB, sparse
    with pytest.raises(TenantPathRefused, match="over the 1048576 bytes"):
        read_file(_place(yard, "big"), reader=None, limits=LIMITS)
    with pytest.raises(TenantPathRefused, match="more than the server hashes"):
        hash_path(_place(yard, "big"), reader=None, limits=LIMITS)


def test_a_missing_file_is_missing(yard: Path) -> None:
    with pytest.raises(TenantPathMissing, match="does not exist"):
        read_file(_place(yard, "out"), reader=None, limits=LIMITS)


def test_going_up_is_refused(yard: Path) -> None:
    with pytest.raises(TenantPathRefused, match=r"'\.\.'"):
        read_file(_place(yard, "../secret"), reader=None, limits=LIMITS)


def test_a_reader_gets_only_what_its_mode_bits_allow(yard: Path, tmp_path: Path) -> None:
    """A hard link (or any file) the tenant could not read itself is refused, and neither
    its bytes nor its digest come back."""
    os.link(tmp_path / "secret", yard / "out")
    for call in (read_file, hash_path):
        with pytest.raises(TenantPathRefused, match="uid 70001 cannot read it") as caught:
            call(_place(yard, "out"), reader=STRANGER, limits=LIMITS)
        assert hashlib.sha256(SECRET).hexdigest() not in str(caught.value)
    (yard / "open").write_bytes(b"1")
    (yard / "open").chmod(0o644)
    assert read_file(_place(yard, "open"), reader=STRANGER, limits=LIMITS) == b"1"


def test_a_reader_must_pass_every_directory(yard: Path) -> None:
    (yard / "closed").mkdir(mode=0o700)
    (yard / "closed" / "out").write_bytes(b"1")
    (yard / "closed" / "out").chmod(0o644)
    with pytest.raises(TenantPathRefused, match="does not let uid 70001 pass"):
        read_file(_place(yard, "closed/out"), reader=STRANGER, limits=LIMITS)


def test_owner_bits_apply_to_the_owner(yard: Path) -> None:
    (yard / "mine").write_bytes(b"7")
    (yard / "mine").chmod(0o400)
    me = Reader(uid=os.geteuid(), gids=(os.getegid(),))
    assert read_file(_place(yard, "mine"), reader=me, limits=LIMITS) == b"7"


def test_a_directory_hash_covers_names_contents_and_link_texts(yard: Path) -> None:
    model = yard / "model"
    (model / "sub").mkdir(parents=True)
    (model / "a").write_bytes(b"a")
    (model / "sub" / "b").write_bytes(b"b")
    (model / "latest").symlink_to("../../secret")  # hashed as its text, never followed
    first = hash_path(_place(yard, "model"), reader=None, limits=LIMITS)
    assert first.startswith("sha256:")
    (model / "sub" / "b").write_bytes(b"c")
    assert hash_path(_place(yard, "model"), reader=None, limits=LIMITS) != first
    os.mkfifo(model / "pipe")
    with pytest.raises(TenantPathRefused, match="a FIFO"):
        hash_path(_place(yard, "model"), reader=None, limits=LIMITS)


def test_a_file_hash_is_its_sha256(yard: Path) -> None:
    (yard / "f").write_bytes(b"hello")
    expected = "sha256:" + hashlib.sha256(b"hello").hexdigest()
    assert hash_path(_place(yard, "f"), reader=None, limits=LIMITS) == expected


def test_a_hash_stops_at_its_file_count(yard: Path) -> None:
    for index in range(5):
        (yard / f"f{index}").write_bytes(b"x")
    with pytest.raises(TenantPathRefused, match="3 files"):
        hash_path(Place(yard, ""), reader=None, limits=Limits(max_bytes=100, max_files=3))


def test_stat_of_tells_file_from_directory(yard: Path) -> None:
    (yard / "d").mkdir()
    assert stat.S_ISDIR(stat_of(_place(yard, "d"), reader=None).st_mode)


def test_make_dirs_never_goes_through_a_link(yard: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    (yard / "run").symlink_to(victim)
    with pytest.raises(TenantPathRefused, match="a symbolic link"):
        make_dirs(_place(yard, "run/step"), owner=(70_001, 70_001))
    assert not (victim / "step").exists()
    assert victim.stat().st_uid == os.geteuid()
    assert stat.S_IMODE(victim.stat().st_mode) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands directories to another uid")
def test_make_dirs_hands_every_directory_to_the_owner(yard: Path) -> None:
    make_dirs(_place(yard, "run/step/0"), owner=(70_001, 70_002))
    for path in (yard / "run", yard / "run/step", yard / "run/step/0"):
        assert (path.stat().st_uid, path.stat().st_gid) == (70_001, 70_002)
        assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_a_mount_source_must_be_a_real_directory_the_user_can_read(
    yard: Path, tmp_path: Path
) -> None:
    (yard / "wal").symlink_to(tmp_path / "secret")
    with pytest.raises(TenantPathRefused, match=r"mounts: .*a symbolic link to"):
        check_mount_source(str(yard / "wal"), reader=None)
    (yard / "file").write_bytes(b"")
    with pytest.raises(TenantPathRefused, match="a regular file, not a directory"):
        check_mount_source(str(yard / "file"), reader=None)
    closed = yard / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(TenantPathRefused, match="uid 70001"):
        check_mount_source(str(closed), reader=STRANGER)
    (closed / "inner").mkdir(mode=0o755)  # open itself, behind a closed directory
    with pytest.raises(TenantPathRefused, match="does not let uid 70001 pass"):
        check_mount_source(str(closed / "inner"), reader=STRANGER)
    with pytest.raises(TenantPathRefused, match="not an absolute path"):
        check_mount_source("data", reader=None)
    # Where every directory on the way lets others pass (pytest's own base may not):
    # a directory they may enter is a source, though they cannot list it.
    with tempfile.TemporaryDirectory(dir="/tmp") as base:
        os.chmod(base, 0o711)
        reachable = Path(base) / "entered"
        reachable.mkdir(mode=0o711)
        check_mount_source(str(reachable), reader=STRANGER)


def test_a_tail_is_read_without_following_a_link_or_opening_a_fifo(yard: Path) -> None:
    (yard / "log").write_bytes(b"a" * 100 + b"end")
    assert read_tail(_place(yard, "log"), reader=None, limit=3) == b"end"
    (yard / "linked").symlink_to("../secret")
    with pytest.raises(TenantPathRefused, match=r"a symbolic link to \.\./secret"):
        read_tail(_place(yard, "linked"), reader=None, limit=10)
    os.mkfifo(yard / "pipe")
    with pytest.raises(TenantPathRefused, match="a FIFO"):
        read_tail(_place(yard, "pipe"), reader=None, limit=10)


def test_make_dirs_says_whether_it_made_the_last_one(yard: Path) -> None:
    assert make_dirs(_place(yard, "a/b"), owner=None) is True
    assert make_dirs(_place(yard, "a/b"), owner=None) is False
    os.mkfifo(yard / "pipe")
    with pytest.raises(TenantPathRefused, match="pipe is a FIFO"):
        make_dirs(_place(yard, "pipe/inner"), owner=None)


def _read_all(place: Place, limits: Limits = LIMITS) -> dict[str, tuple[bytes, int, bool]]:
    return {
        found.path: (b"".join(found.chunks), found.size, found.executable)
        for found in read_tree(place, reader=None, limits=limits)
    }


def test_a_tree_is_read_back_exactly(yard: Path) -> None:
    model = yard / "model"
    (model / "sub" / "deeper").mkdir(parents=True)
    (model / "empty").mkdir()
    (model / "weights.bin").write_bytes(b"w" * (3 << 20))  # over one chunk
    (model / "sub" / "config.json").write_bytes(b"{}")
    (model / "sub" / "deeper" / "run.sh").write_bytes(b"#!/bin/sh\n")
    (model / "sub" / "deeper" / "run.sh").chmod(0o755)
    (model / "sub-file").write_bytes(b"")
    limits = Limits(max_bytes=4 << 20)
    found = [entry.path for entry in read_tree(_place(yard, "model"), reader=None, limits=limits)]
    assert found == ["sub/config.json", "sub/deeper/run.sh", "sub-file", "weights.bin"]
    assert _read_all(_place(yard, "model"), limits) == {
        "sub/config.json": (b"{}", 2, False),
        "sub/deeper/run.sh": (b"#!/bin/sh\n", 10, True),
        "sub-file": (b"", 0, False),
        "weights.bin": (b"w" * (3 << 20), 3 << 20, False),
    }


def test_an_empty_tree_yields_nothing(yard: Path) -> None:
    assert _read_all(Place(yard, "")) == {}


def test_a_link_inside_a_tree_is_refused_naming_it(yard: Path, tmp_path: Path) -> None:
    (yard / "model" / "sub").mkdir(parents=True)
    (yard / "model" / "sub" / "weights").symlink_to(tmp_path / "secret")
    with pytest.raises(TenantPathRefused, match="a symbolic link to") as caught:
        _read_all(_place(yard, "model"))
    assert caught.value.path == str(yard / "model" / "sub" / "weights")
    assert "copy the file" in str(caught.value)
    assert SECRET.decode() not in str(caught.value)


def test_a_fifo_inside_a_tree_is_refused_at_once(yard: Path) -> None:
    (yard / "model").mkdir()
    (yard / "model" / "a").write_bytes(b"a")
    os.mkfifo(yard / "model" / "pipe")  # opened for reading, it would block forever
    with pytest.raises(TenantPathRefused, match="it is a FIFO") as caught:
        _read_all(_place(yard, "model"))
    assert caught.value.path == str(yard / "model" / "pipe")


def test_a_tree_over_its_bytes_or_files_is_refused(yard: Path) -> None:
    (yard / "model").mkdir()
    with (yard / "model" / "big").open("wb") as big:
        big.truncate(100 * 2**20)  # sparse
    with pytest.raises(TenantPathRefused, match="over 1048576 bytes or 100000 entries") as caught:
        _read_all(_place(yard, "model"))
    assert caught.value.path == str(yard / "model" / "big")
    (yard / "many").mkdir()
    for index in range(5):
        (yard / "many" / f"f{index}").write_bytes(b"x")
    with pytest.raises(TenantPathRefused, match="or 3 entries") as caught:
        _read_all(_place(yard, "many"), Limits(max_bytes=100, max_files=3))
    assert caught.value.path == str(yard / "many" / "f3")


def test_a_tree_must_be_a_real_directory(yard: Path, tmp_path: Path) -> None:
    (yard / "model").symlink_to(tmp_path)
    with pytest.raises(TenantPathRefused, match="it is a symbolic link to"):
        _read_all(_place(yard, "model"))
    (yard / "file").write_bytes(b"x")
    with pytest.raises(TenantPathRefused, match=r"it is a regular file.*fix: write a directory"):
        _read_all(_place(yard, "file"))


def test_a_tree_the_reader_cannot_read_is_refused(yard: Path, tmp_path: Path) -> None:
    (yard / "model").mkdir(mode=0o755)
    os.link(tmp_path / "secret", yard / "model" / "weights")  # another uid's, 0600
    with pytest.raises(TenantPathRefused, match="uid 70001 cannot read it") as caught:
        list(read_tree(_place(yard, "model"), reader=STRANGER, limits=LIMITS))
    assert caught.value.path == str(yard / "model" / "weights")


def test_a_file_that_grows_while_read_is_refused(yard: Path) -> None:
    (yard / "model").mkdir()
    (yard / "model" / "log").write_bytes(b"x" * 10)
    with pytest.raises(TenantPathRefused, match="changed size while it was read"):
        for found in read_tree(_place(yard, "model"), reader=None, limits=LIMITS):
            (yard / "model" / "log").write_bytes(b"x" * 20)
            b"".join(found.chunks)
