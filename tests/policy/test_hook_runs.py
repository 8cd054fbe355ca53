"""What the git hooks run (``git_hooks.hook_runs``, the end-of-turn summary of issue 32 §1): the
files a hook names, the configuration of the tools it starts — in a nested repository too — and a
bounded look whatever the repository's configuration says."""

from __future__ import annotations

import subprocess

from agent_server.policy import git_hooks


def _husky(top) -> None:
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    subprocess.run(["git", "-C", str(top), "config", "core.hooksPath", ".husky"], check=True)
    (top / ".husky").mkdir()
    (top / ".husky" / "pre-commit").write_text("#!/bin/sh\nnpx eslint .\n./scripts/check.sh\n")
    (top / "scripts").mkdir()
    (top / "scripts" / "check.sh").write_text("#!/bin/sh\n")


def test_a_nested_repositorys_hooks_name_what_they_run(tmp_path):
    _husky(tmp_path / "app")
    runs = git_hooks.hook_runs([tmp_path, tmp_path / "app"])
    assert runs is not None
    assert runs.why(str(tmp_path / "app" / "scripts" / "check.sh")).endswith("app/.husky/pre-commit")
    assert runs.why(str(tmp_path / "app" / "eslint.config.js")) is not None
    assert runs.why(str(tmp_path / "app" / "README.md")) is None
    assert git_hooks.hook_runs([tmp_path]) is None  # the folder itself has no hooks


def test_a_hooks_path_of_the_whole_tree_made_the_summary_read_every_file(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "config", "core.hooksPath", "."], check=True)
    for i in range(50):
        (tmp_path / f"d{i}").mkdir()
        for j in range(20):
            (tmp_path / f"d{i}" / f"f{j}.txt").write_text("x\n")
    read = []
    real = git_hooks._head
    monkeypatch.setattr(git_hooks, "_head", lambda path: read.append(path) or real(path))
    assert git_hooks.hook_runs([tmp_path]) is not None
    assert len(read) <= git_hooks._MAX_HOOK_FILES
