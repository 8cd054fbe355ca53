"""The git-hook check reads the repository's configuration with ``git config``: once per file, again
only when the file (or a file it includes) changed — counted through a ``git`` on PATH that logs each
run, no clock."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_server.policy import git_hooks
from tests.policy.test_engine import FULL, make, prepared  # noqa: F401 - the fixture

REAL_GIT = shutil.which("git")


@pytest.fixture
def counted_git(tmp_path, monkeypatch):
    """A ``git`` first on PATH that appends its arguments to a file, then runs the real one; the
    cache is emptied and no file counts as changed too recently (``RACY_NS`` 0: the test's files are
    all new)."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "git-calls"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {REAL_GIT} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(git_hooks, "RACY_NS", 0, raising=False)
    getattr(git_hooks, "_cache", {}).clear()

    def count() -> int:
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    return count


def _repo(ws: Path) -> None:
    subprocess.run([REAL_GIT, "init", "-q", str(ws)], check=True)
    (ws / ".husky").mkdir()
    (ws / "gitconfig.local").write_text("[user]\n\tname = me\n")
    for key, value in (("core.hooksPath", ".husky"), ("include.path", "../gitconfig.local")):
        subprocess.run([REAL_GIT, "-C", str(ws), "config", key, value], check=True)


async def test_the_git_hook_check_ran_git_config_on_every_shell_command_and_every_file_tool_write(make, counted_git):
    policy, approver, _, _, ws = make(status=FULL)
    _repo(ws)
    for i in range(5):
        assert (await policy.evaluate(prepared("bash", command=f"echo {i}"))).outcome == "allow"
        assert (await policy.evaluate(prepared("write", path=f"f{i}.txt", content="x"))).outcome == "allow"
        policy.shell_launcher.spec("workspace-write")
    first = counted_git()
    assert first == 2  # .git/config and the included gitconfig.local, once each
    (ws / "gitconfig.local").write_text("[core]\n\thooksPath = .lefthook\n")  # an include changed: read again
    assert (await policy.evaluate(prepared("write", path=".lefthook/x", content="x"))).outcome == "ask"
    assert counted_git() == first + 1
    subprocess.run([REAL_GIT, "-C", str(ws), "config", "filter.t.clean", "scripts/t.sh"], check=True)
    before = counted_git()  # the config command itself ran git once
    assert (await policy.evaluate(prepared("write", path="scripts/t.sh", content="x"))).outcome == "ask"
    assert counted_git() == before + 1
    for i in range(3):
        await policy.evaluate(prepared("bash", command=f"echo {i}"))
    assert counted_git() == before + 1


def test_a_configuration_changed_too_recently_to_trust_its_timestamps_is_read_again(tmp_path, counted_git,
                                                                                     monkeypatch):
    ws = tmp_path / "ws"
    _repo(ws)
    monkeypatch.setattr(git_hooks, "RACY_NS", 10**18)  # every file is "just changed"
    start = counted_git()
    git_hooks.hook_paths([ws])
    git_hooks.hook_paths([ws])
    assert counted_git() == start + 4
