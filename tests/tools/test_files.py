"""The workspace-file seam on disk: atomic guarded writes, modes, symlinks, the read ledger."""

from __future__ import annotations

import os
import stat

import pytest

from agent_server.tools.files import DiskFiles, FileSnapshot, FileTooLargeError, ReadLedger, sha256_hex


async def test_read_gives_bytes_and_digest(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"x\r\ny")
    snap = await DiskFiles().read(p)
    assert snap.raw == b"x\r\ny" and snap.sha256 == sha256_hex(b"x\r\ny") and snap.version is None


async def test_read_errors_are_the_documented_ones(tmp_path):
    files = DiskFiles(max_read_bytes=10)
    with pytest.raises(FileNotFoundError):
        await files.read(tmp_path / "missing")
    with pytest.raises(IsADirectoryError):
        await files.read(tmp_path)
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(FileTooLargeError):
        await files.read(tmp_path / "big")


async def test_guarded_write_replaces_and_keeps_mode(tmp_path):
    p = tmp_path / "run.sh"
    p.write_bytes(b"old")
    os.chmod(p, 0o750)
    files = DiskFiles()
    base = await files.read(p)
    out = await files.write(p, b"new", base=base)
    assert out.status == "written" and out.snapshot.raw == b"new"
    assert p.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o750
    assert [f.name for f in tmp_path.iterdir()] == ["run.sh"]  # no temp file left


async def test_stale_base_writes_nothing(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"one")
    files = DiskFiles()
    base = await files.read(p)
    p.write_bytes(b"two")
    out = await files.write(p, b"three", base=base)
    assert out.status == "stale" and "changed" in out.message
    assert p.read_bytes() == b"two"


async def test_new_file_guard_and_parents_and_mode(tmp_path):
    files = DiskFiles()
    p = tmp_path / "deep" / "er" / "new.txt"
    out = await files.write(p, b"hi", base=None)
    assert out.status == "written" and p.read_bytes() == b"hi"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o644 & ~umask
    again = await files.write(p, b"other", base=None)
    assert again.status == "stale" and p.read_bytes() == b"hi"


async def test_deleted_since_read_is_stale(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"one")
    files = DiskFiles()
    base = await files.read(p)
    p.unlink()
    assert (await files.write(p, b"x", base=base)).status == "stale"
    assert not p.exists()


async def test_write_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_bytes(b"a")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    files = DiskFiles()
    out = await files.write(link, b"b", base=await files.read(link))
    assert out.status == "written"
    assert link.is_symlink() and target.read_bytes() == b"b"


async def test_unwritable_folder_fails_without_raising(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    out = await DiskFiles().write(blocker / "sub" / "x.txt", b"x", base=None)
    assert out.status == "failed" and out.message


def test_ledger_keys_by_resolved_path(tmp_path):
    real = tmp_path / "r.txt"
    real.write_bytes(b"x")
    (tmp_path / "l.txt").symlink_to(real)
    ledger = ReadLedger()
    snap = FileSnapshot.of(tmp_path / "sub" / ".." / "l.txt", b"x")
    ledger.record(snap)
    assert ledger.last(real) is snap
    assert ledger.last(tmp_path / "other") is None
    ledger.forget(real)
    assert ledger.last(real) is None
