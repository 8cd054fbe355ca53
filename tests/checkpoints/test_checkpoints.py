"""Checkpoints: the blob store, the shadow repository and the /undo–/redo planning."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_server.checkpoints import BlobStore, FileState, ShadowRepo, changed_turns, plan_redo, plan_undo
from agent_server.policy.paths import SecretMatcher


def ev(kind: str, **data):
    return SimpleNamespace(type=kind, data=data)


def change(turn: int, path: str, before: FileState | None, after: FileState | None):
    return ev("checkpoint/file", turn=turn, call_id=f"c{turn}", path=path, source="edit",
              before=before.to_json() if before else None, after=after.to_json() if after else None)


A0, A1, B0, B1, C1 = (FileState(c * 64, 0o644) for c in "abcde")


def restored(path: str, outcome: str = "restored") -> dict:
    return {"path": path, "outcome": outcome}


def test_blob_store_keeps_bytes_once_private_and_collects_unreferenced(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    sha = store.put(b"one\n")
    assert store.put(b"one\n") == sha and store.get(sha) == b"one\n"
    other = store.put(b"two\n")
    path = tmp_path / "blobs" / sha[:2] / sha[2:]
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "blobs").stat().st_mode & 0o777 == 0o700
    assert store.collect({sha}) == 1
    assert store.get(sha) == b"one\n"
    with pytest.raises(FileNotFoundError):
        store.get(other)
    with pytest.raises(ValueError):
        store.get("../../etc/passwd")


def test_blob_store_put_file_keeps_mode_and_skips_missing_and_links(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    script = tmp_path / "run.sh"
    script.write_bytes(b"#!/bin/sh\n")
    script.chmod(0o750)
    state = store.put_file(script)
    assert state == FileState(store.put(b"#!/bin/sh\n"), 0o750)
    assert store.put_file(tmp_path / "missing") is None
    (tmp_path / "link").symlink_to(script)
    assert store.put_file(tmp_path / "link") is None


def test_undo_takes_back_the_newest_turn_then_the_one_before_and_redo_reapplies():
    events = [change(1, "/w/a.txt", A0, A1), change(2, "/w/b.txt", B0, B1), change(2, "/w/c.txt", None, C1)]
    turn, restores = plan_undo(events)
    assert turn == 2
    assert {(str(r.path), r.expect, r.target) for r in restores} == {("/w/b.txt", B1, B0), ("/w/c.txt", C1, None)}
    events.append(ev("checkpoint/undo", turn=2, files=[restored("/w/b.txt"), restored("/w/c.txt", "removed (the agent had created it)")]))
    turn, restores = plan_undo(events)
    assert turn == 1 and [(r.expect, r.target) for r in restores] == [(A1, A0)]
    events.append(ev("checkpoint/undo", turn=1, files=[restored("/w/a.txt")]))
    assert plan_undo(events) is None
    turn, restores = plan_redo(events)
    assert turn == 1 and [(r.expect, r.target) for r in restores] == [(A0, A1)]
    events.append(ev("checkpoint/redo", turn=1, files=[restored("/w/a.txt")]))
    assert plan_redo(events)[0] == 2
    assert plan_undo(events)[0] == 1


def test_a_turn_that_changes_a_file_twice_restores_its_first_before_and_guards_on_its_last_after():
    events = [change(3, "/w/a.txt", A0, A1), change(3, "/w/a.txt", A1, B1)]
    turn, [restore] = plan_undo(events)
    assert (turn, restore.expect, restore.target) == (3, B1, A0)


def test_a_change_put_back_within_the_turn_is_no_change():
    events = [change(1, "/w/a.txt", A0, A1), change(1, "/w/a.txt", A1, A0)]
    assert changed_turns(events) == [] and plan_undo(events) is None


def test_new_agent_change_after_undo_clears_redo_but_keeps_the_undone_turn_undone():
    events = [change(1, "/w/a.txt", A0, A1), ev("checkpoint/undo", turn=1, files=[restored("/w/a.txt")]),
              change(2, "/w/b.txt", B0, B1)]
    assert plan_redo(events) is None
    turn, _ = plan_undo(events)
    assert turn == 2
    events.append(ev("checkpoint/undo", turn=2, files=[restored("/w/b.txt")]))
    assert plan_undo(events) is None


def git_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "keep.txt").write_text("keep\n")
    (root / ".env").write_text("API_KEY=hunter2\n")
    (root / ".gitignore").write_text("build/\n")
    return root


def test_shadow_snapshot_diff_leaves_secrets_out_and_never_touches_the_users_git(tmp_path):
    root = git_workspace(tmp_path)
    user_git = sorted(p.relative_to(root) for p in (root / ".git").rglob("*"))
    matcher = SecretMatcher([".env*", "*.pem"])
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, is_secret=matcher.match,
                      name_patterns=(".env*", "*.pem"))
    blobs = BlobStore(tmp_path / "state" / "blobs")
    before = repo.snapshot().tree
    (root / "keep.txt").write_text("changed\n")
    (root / "new.sh").write_text("echo hi\n")
    (root / "new.sh").chmod(0o755)
    (root / ".env").write_text("API_KEY=changed\n")
    (root / "key.pem").write_text("-----BEGIN-----\n")
    (root / "build").mkdir()
    (root / "build" / "out.o").write_bytes(b"\0obj")
    after = repo.snapshot().tree
    found = {c.path.name: c for c in repo.changes(before, after, blobs)}
    assert set(found) == {"keep.txt", "new.sh"}
    assert blobs.get(found["keep.txt"].before.blob) == b"keep\n"
    assert blobs.get(found["keep.txt"].after.blob) == b"changed\n"
    assert found["new.sh"].before is None and found["new.sh"].after.mode == 0o755
    # no secret ever entered the shadow objects
    assert "hunter2" not in "".join(blobs.get(s.blob).decode() for c in found.values() for s in (c.before, c.after) if s)
    listed = subprocess.run(["git", f"--git-dir={tmp_path / 'state' / 'shadow.git'}", "ls-tree", "-r", "--name-only", after],
                            capture_output=True, text=True, check=True).stdout.split()
    assert ".env" not in listed and "key.pem" not in listed and "keep.txt" in listed
    assert sorted(p.relative_to(root) for p in (root / ".git").rglob("*")) == user_git
    assert not (root / ".git" / "index").exists()  # the user's repository never got an index from us


def test_shadow_is_git_workspace(tmp_path):
    root = git_workspace(tmp_path)
    (root / "sub").mkdir()
    assert ShadowRepo.is_git_workspace(root / "sub")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not ShadowRepo.is_git_workspace(plain)


def du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_snapshot_of_a_2000_file_tree_does_no_per_file_work_over_the_index_and_never_copies_a_big_file(tmp_path):
    """Regression (cost): each snapshot checked every indexed path against the secret patterns in a
    Python loop, and an untracked data file was copied into the shadow repository."""
    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i in range(2000):
        folder = root / f"pkg{i % 40}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"VALUE = {i}\n")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree"],
                   check=True)
    with open(root / "data.bin", "wb") as fh:  # untracked, 20 MiB
        fh.write(os.urandom(1 << 20) * 20)
    checked: list[Path] = []

    def is_secret(path: Path):
        checked.append(path)
        return None

    state = tmp_path / "state"
    repo = ShadowRepo(state / "shadow.git", root, index=state / "session" / "shadow-index", is_secret=is_secret,
                      max_file_bytes=10 << 20)
    blobs = BlobStore(state / "blobs")
    first = repo.snapshot()
    assert len(checked) <= 4, checked  # the index starts as the workspace's own: only data.bin is new
    assert first.big == {"data.bin": first.big["data.bin"]} and first.big["data.bin"][0] == 20 << 20
    for n in range(10):  # ten calls, each changing one file
        checked.clear()
        before = repo.snapshot()
        (root / "pkg3" / "mod3.py").write_text(f"VALUE = {n}\n")
        after = repo.snapshot()
        assert len(checked) <= 4, checked  # the changed file and the big one: never the 2,000 others
        (change,) = repo.changes(before.tree, after.tree, blobs)
        assert change.path == root / "pkg3" / "mod3.py"
    with open(root / "data.bin", "ab") as fh:
        fh.write(b"more")
    grown = repo.snapshot()
    assert grown.big["data.bin"] != first.big["data.bin"]
    sizes = subprocess.run(["git", f"--git-dir={state / 'shadow.git'}", "cat-file", "--batch-all-objects",
                            "--batch-check=%(objectsize)"], capture_output=True, text=True, check=True).stdout.split()
    assert max(int(s) for s in sizes) < 1 << 20  # the data file never entered the shadow objects
    assert du(state) < 4 << 20  # the workspace's own objects are borrowed, not copied


def test_the_shadow_stores_raw_bytes_whatever_gitattributes_say(tmp_path):
    root = git_workspace(tmp_path)
    (root / ".gitattributes").write_bytes(b"*.bat text eol=crlf\n*.txt filter=lfs\n")
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, index=tmp_path / "state" / "index")
    blobs = BlobStore(tmp_path / "state" / "blobs")
    before = repo.snapshot().tree
    (root / "run.bat").write_bytes(b"@echo off\r\n")
    (root / "keep.txt").write_bytes(b"mixed\r\nline\n")
    found = {c.path.name: c for c in repo.changes(before, repo.snapshot().tree, blobs)}
    assert blobs.get(found["run.bat"].after.blob) == b"@echo off\r\n"
    assert blobs.get(found["keep.txt"].after.blob) == b"mixed\r\nline\n"


def test_pruning_keeps_what_a_live_sessions_index_needs_and_drops_what_a_deleted_one_had(tmp_path):
    root = git_workspace(tmp_path)
    git_dir = tmp_path / "state" / "shadow.git"
    live, deleted = tmp_path / "state" / "a" / "index", tmp_path / "state" / "b" / "index"
    ShadowRepo(git_dir, root, index=live).snapshot()
    (root / "only-b.bin").write_bytes(os.urandom(1 << 20))
    gone = subprocess.run(["git", "hash-object", str(root / "only-b.bin")], capture_output=True, text=True,
                          check=True).stdout.strip()
    ShadowRepo(git_dir, root, index=deleted).snapshot()
    (root / "only-b.bin").unlink()
    deleted.unlink()  # session b was deleted
    repo = ShadowRepo(git_dir, root, index=live)
    big = repo.size_bytes()
    repo.prune([live, deleted], expire="now")
    exists = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e", gone], capture_output=True)
    assert exists.returncode != 0  # only the deleted session's index named it
    assert repo.size_bytes() < big - (1 << 19)
    assert repo.snapshot().tree  # the live index's objects are all still there


def test_a_submodules_files_are_captured_like_a_nested_repositorys(tmp_path):
    root = git_workspace(tmp_path)
    lib = tmp_path / "lib"
    subprocess.run(["git", "init", "-q", str(lib)], check=True)
    (lib / "lib.c").write_text("int one;\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    subprocess.run(["git", "-C", str(lib), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(lib), "commit", "-qm", "lib"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "-c", "protocol.file.allow=always", "submodule", "--quiet", "add",
                    str(lib), "vendor/lib"], check=True, env=env)
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, index=tmp_path / "state" / "index")
    blobs = BlobStore(tmp_path / "state" / "blobs")
    before = repo.snapshot().tree
    (root / "vendor" / "lib" / "lib.c").write_text("int two;\n")
    found = {c.path: c for c in repo.changes(before, repo.snapshot().tree, blobs)}
    change = found[root / "vendor" / "lib" / "lib.c"]
    assert blobs.get(change.before.blob) == b"int one;\n" and blobs.get(change.after.blob) == b"int two;\n"


async def test_a_plain_folder_past_the_budget_turns_capture_off_and_says_so_at_once(tmp_path):
    from agent_server.checkpoints.recorder import Checkpoints
    from agent_server.session import EventLog

    root = tmp_path / "home"
    root.mkdir()
    for i in range(5):
        (root / f"f{i}").write_text("x")
    log = EventLog.create(tmp_path / "state" / "sessions" / "s" / "events.jsonl", {"cwd": str(root)})
    said = []

    async def emit(update):
        said.append(update)

    cp = Checkpoints(log, BlobStore(tmp_path / "state" / "blobs"), [root], tmp_path / "state", is_secret=lambda p: None,
                     name_patterns=(), emit=emit, plain_budget_files=3)
    assert cp.shadow() is None and "more than 3 files" in cp.capture_off
    await cp._say_capture_off()
    await cp._say_capture_off()  # once a session
    assert [e.type for e in log.events].count("checkpoint/off") == 1
    (update,) = said
    assert "not captured for /undo" in update["content"]["text"]
    within = Checkpoints(log, BlobStore(tmp_path / "state" / "blobs"), [root], tmp_path / "state",
                         is_secret=lambda p: None, name_patterns=(), plain_budget_files=10)
    assert within.shadow() is not None


def test_an_undo_the_user_declined_throughout_is_no_undo_and_redo_takes_only_what_an_undo_changed():
    """The rules of ``plan.history`` on logs of every age: an undo written before ``done``/``changed``
    (read from its outcome words), a declined one, a partly accepted one, an interrupted one."""
    from agent_server.checkpoints import history

    base = [change(1, "/w/a.txt", A0, A1), change(2, "/w/b.txt", B0, B1), change(2, "/w/c.txt", None, C1)]
    kept = {"path": "/w/b.txt", "outcome": "kept the user's version (changed since the agent's edit)"}
    rejected = {"path": "/w/c.txt", "outcome": "not restored (the user rejected the restore in the editor)"}
    declined = [*base, ev("checkpoint/undo", turn=2, files=[kept, rejected])]  # an old log: no done, no changed
    assert plan_undo(declined)[0] == 2 and plan_redo(declined) is None
    # partly accepted: turn 2 undone for c.txt; redo leaves b.txt alone
    partly = [*base, ev("checkpoint/undo", turn=2, files=[kept, restored("/w/c.txt", "removed (the agent had created it)")])]
    assert plan_undo(partly)[0] == 1
    turn, restores = plan_redo(partly)
    assert turn == 2 and [(str(r.path), r.leave) for r in restores] == [("/w/b.txt", True), ("/w/c.txt", False)]
    # nothing changed, nothing declined (each file already as it was): counts, nothing to redo
    as_was = [*base, ev("checkpoint/undo", turn=2, files=[restored("/w/b.txt", "already as it was"),
                                                          restored("/w/c.txt", "already gone")])]
    assert plan_undo(as_was)[0] == 1 and plan_redo(as_was) is None
    assert history(as_was).last["undo"].changed is False
    # interrupted (done false): the turn again; what it restored adds to the next run's
    cut = [*base, ev("checkpoint/undo", turn=2, files=[{**restored("/w/b.txt"), "changed": True}], done=False,
                     interrupted=True)]
    assert plan_undo(cut)[0] == 2 and plan_redo(cut) is None
    cut.append(ev("checkpoint/undo", turn=2, files=[restored("/w/b.txt", "already as it was"),
                                                    restored("/w/c.txt", "removed (the agent had created it)")], done=True))
    turn, restores = plan_redo(cut)
    assert turn == 2 and not any(r.leave for r in restores)
    assert history(cut[:-1]).interrupted[2].files == (Path("/w/b.txt"),) and 2 not in history(cut).interrupted
    # a redo cut off (b.txt re-applied): the turn stays undone; the next redo leaves b.txt as redone
    cut.append(ev("checkpoint/redo", turn=2, files=[{**restored("/w/b.txt"), "changed": True}], done=False,
                  interrupted=True))
    turn, restores = plan_redo(cut)
    assert turn == 2 and [(str(r.path), r.leave, r.redone) for r in restores] == [
        ("/w/b.txt", True, True), ("/w/c.txt", False, False)]
    assert history(cut).last["redo"].interrupted and history(cut).redone == {2: {Path("/w/b.txt")}}
    cut.append(ev("checkpoint/redo", turn=2, files=[restored("/w/b.txt", "already redone"),
                                                    restored("/w/c.txt", "created again (the agent had created it)")],
                  done=True))
    assert plan_redo(cut) is None and plan_undo(cut)[0] == 2 and history(cut).redone == {}


def test_a_newly_created_one_line_file_was_counted_plus_1_minus_1(tmp_path):
    """Newcomer 4, finding 8: a created one-line file (no final newline, as `.vscode/settings.json`) was
    counted "+1 −1" — the empty "before" taken as one empty line removed. Nothing was removed; the count
    (``lineCounts``, for the Changes box of a call without a diff and of a loaded session) says so."""
    from agent_server.checkpoints.recorder import Checkpoints
    from agent_server.session import EventLog

    root = tmp_path / "ws"
    root.mkdir()
    log = EventLog.create(tmp_path / "state" / "sessions" / "s" / "events.jsonl", {"cwd": str(root)})
    blobs = BlobStore(tmp_path / "state" / "blobs")
    cp = Checkpoints(log, blobs, [root], tmp_path / "state", is_secret=lambda p: None, name_patterns=())

    def counts(before: bytes | None, after: bytes | None) -> list[int] | None:
        def state(raw: bytes | None) -> FileState | None:
            return None if raw is None else blobs.keep(raw, 0o644)

        return cp._line_counts(state(before), state(after))

    assert counts(None, b'{ "editor.tabSize": 2 }') == [1, 0]
    assert counts(b"", b"x\n") == [1, 0]
    assert counts(b"last", None) == [0, 1]
    assert counts(b"a\n", b"a\nb\n") == [1, 0]
    assert counts(b"a\n", b"a") == [1, 1]  # the final newline dropped: the line changed


def test_the_snapshot_exclude_file_let_upper_case_secret_names_and_git_folders_into_the_shadow_tree(tmp_path):
    """``info/exclude`` held the secret name globs as written (``.env*``, ``*.pem``), and git matches
    them case-sensitively: ``.ENV``, ``Key.PEM``, ``ID_RSA`` went into the tree of a repository that
    relies on it, and so did a ``.GIT`` folder (what a case-folding filesystem opens as ``.git``).
    Every glob is written in any case now."""
    root = tmp_path / "ws"
    root.mkdir()
    for name in (".ENV", ".Env.local", "Key.PEM", "ID_RSA", "keep.txt"):
        (root / name).write_text("x\n")
    (root / ".GIT" / "hooks").mkdir(parents=True)
    (root / ".GIT" / "hooks" / "pre-commit").write_text("x\n")
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, name_patterns=(".env*", "*.pem", "*id_rsa*"))
    tree = repo.snapshot().tree
    listed = subprocess.run(["git", f"--git-dir={tmp_path / 'state' / 'shadow.git'}", "ls-tree", "-r", "--name-only",
                             tree], capture_output=True, text=True, check=True).stdout.split()
    assert listed == ["keep.txt"]


def test_a_shell_chmod_other_than_the_executable_bit_was_not_in_the_snapshots_changes(tmp_path):
    """Newcomer 5 finding 3, at the shadow repository: git's tree keeps only the executable bit, so
    ``chmod 600 plain.txt`` was no change at all, and a file rewritten and made private in one call
    was recorded with its new mode as its old one. A snapshot keeps the permission bits git cannot
    tell; ``changes`` of two snapshots lists a mode-only change with the same bytes on both sides."""
    root = git_workspace(tmp_path)
    for name, text, mode in (("plain.txt", "plain\n", 0o644), ("run.sh", "#!/bin/sh\n", 0o755),
                             ("notes.txt", "notes\n", 0o644), ("odd.txt", "odd\n", 0o640)):
        (root / name).write_text(text)
        (root / name).chmod(mode)
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, index=tmp_path / "state" / "index")
    blobs = BlobStore(tmp_path / "state" / "blobs")
    before = repo.snapshot()
    (root / "plain.txt").chmod(0o600)
    (root / "run.sh").chmod(0o700)
    (root / "notes.txt").chmod(0o600)
    (root / "notes.txt").write_text("secret notes\n")
    (root / "odd.txt").chmod(0o000)
    found = {c.path.name: c for c in repo.changes(before, repo.snapshot(), blobs)}
    assert set(found) == {"plain.txt", "run.sh", "notes.txt", "odd.txt"}, found
    assert (found["plain.txt"].before.mode, found["plain.txt"].after.mode) == (0o644, 0o600)
    assert found["plain.txt"].before.blob == found["plain.txt"].after.blob
    assert blobs.get(found["plain.txt"].after.blob) == b"plain\n"
    assert (found["run.sh"].before.mode, found["run.sh"].after.mode) == (0o755, 0o700)
    assert (found["notes.txt"].before.mode, found["notes.txt"].after.mode) == (0o644, 0o600)
    assert blobs.get(found["notes.txt"].before.blob) == b"notes\n"
    assert (found["odd.txt"].before.mode, found["odd.txt"].after.mode) == (0o640, 0o000)
    (root / "odd.txt").chmod(0o640)


def _count_walks(monkeypatch, root: Path) -> list[str]:
    """Every whole-tree walk a snapshot starts for permission bits: a ``find``, git's listing of the
    ignored folders, a Python walk from the root (``os.scandir`` or ``os.walk`` of ``root``)."""
    import agent_server.checkpoints.shadow as shadow

    walks: list[str] = []
    real_run, real_scandir, real_walk = subprocess.run, os.scandir, os.walk

    def run(argv, *args, **kwargs):
        if argv[0] == "find" or "--ignored" in argv:
            walks.append(" ".join(argv[:2]))
        return real_run(argv, *args, **kwargs)

    def scandir(path="."):
        if Path(path) == root:
            walks.append("scandir")
        return real_scandir(path)

    def walk(top, *args, **kwargs):
        if Path(top) == root:
            walks.append("walk")
        return real_walk(top, *args, **kwargs)

    monkeypatch.setattr(shadow.subprocess, "run", run)
    monkeypatch.setattr(shadow.os, "scandir", scandir)
    monkeypatch.setattr(shadow.os, "walk", walk)
    return walks


def test_each_shell_snapshot_walked_the_whole_tree_twice_more_for_permission_bits(tmp_path, monkeypatch):
    """Shell call cost: since the mode tracking every snapshot (two a shell call) listed git's ignored
    folders and ran ``find`` over the whole tree (+~30 % a call on 20k files). Only the session's
    first snapshot walks the tree; later ones look at what git's own listing names (a ``chmod``
    changes the ctime git compares) and at the files recorded in the last seconds (git compares ctime
    by the second): a mode-only change is still seen, with no walk."""
    root = git_workspace(tmp_path)
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o750)
    for n in range(5):
        (root / f"f{n}.txt").write_text(f"{n}\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "t"], check=True)
    hour_ago = (root / ".git" / "index").stat().st_mtime - 3600
    os.utime(root / ".git" / "index", (hour_ago, hour_ago))  # the user's git ran long ago
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, index=tmp_path / "state" / "index")
    blobs = BlobStore(tmp_path / "state" / "blobs")
    walks = _count_walks(monkeypatch, root)
    first = repo.snapshot()
    assert walks, "the session's first snapshot learns every file's permission bits"
    assert first.modes == {"run.sh": 0o750}
    walks.clear()
    (root / "new.txt").write_text("new\n")
    before = repo.snapshot()  # records new.txt: its ctime is in this very second
    (root / "new.txt").chmod(0o600)
    after = repo.snapshot()
    found = {c.path.name: c for c in repo.changes(before, after, blobs)}
    assert set(found) == {"new.txt"} and (found["new.txt"].before.mode, found["new.txt"].after.mode) == (0o644, 0o600)
    assert after.modes == {"run.sh": 0o750, "new.txt": 0o600}
    assert walks == [], walks


@pytest.mark.parametrize("find", ["busybox", "missing"])
def test_a_chmod_was_not_recorded_without_a_word_where_find_had_no_printf_or_was_missing(tmp_path, monkeypatch, find):
    """Shell call cost, item 2: the permission bits came from ``find -printf``; busybox's and macOS's
    ``find`` have no ``-printf`` and a minimal image has no ``find``: each snapshot's modes were then
    unknown and ``chmod 600`` was no change at all, silently. The walk no longer needs ``find``."""
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("git", "sh", "bash"):
        (fake / tool).symlink_to(shutil.which(tool))
    if find == "busybox":
        (fake / "find").write_text("#!/bin/sh\necho \"find: unrecognized: -printf\" >&2\nexit 1\n")
        (fake / "find").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    root = git_workspace(tmp_path)
    (root / "plain.txt").write_text("plain\n")
    (root / "odd.txt").write_text("odd\n")
    (root / "odd.txt").chmod(0o640)
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, index=tmp_path / "state" / "index")
    blobs = BlobStore(tmp_path / "state" / "blobs")
    before = repo.snapshot()
    assert before.modes == {"odd.txt": 0o640}
    (root / "plain.txt").chmod(0o600)
    found = {c.path.name: c for c in repo.changes(before, repo.snapshot(), blobs)}
    assert set(found) == {"plain.txt"}, found
    assert (found["plain.txt"].before.mode, found["plain.txt"].after.mode) == (0o644, 0o600)


def test_a_chmod_in_the_second_the_users_git_recorded_the_file_is_still_a_change(tmp_path):
    """git compares an index entry's ctime by the second: right after the user's ``git add`` (the
    session's index is a copy of the user's), a ``chmod`` in that second leaves git's listing as it
    was. Such an index keeps the snapshots walking until its second is past."""
    root = git_workspace(tmp_path)
    (root / "plain.txt").write_text("plain\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "t"], check=True)
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, index=tmp_path / "state" / "index")
    blobs = BlobStore(tmp_path / "state" / "blobs")
    before = repo.snapshot()
    (root / "plain.txt").chmod(0o600)
    found = {c.path.name: c for c in repo.changes(before, repo.snapshot(), blobs)}
    assert set(found) == {"plain.txt"}, found
    assert (found["plain.txt"].before.mode, found["plain.txt"].after.mode) == (0o644, 0o600)


def test_a_chmod_of_a_file_recorded_seconds_before_was_missed_by_gits_listing(tmp_path, monkeypatch):
    """Shell call cost: ``git ls-files --modified`` compares the bytes of a file whose stat changed
    and leaves it out when they are the same — a ``chmod 600`` alone (only its ctime changed). Once
    the snapshots stopped walking the tree, such a chmod of a file recorded in an earlier second was
    no change at all. (Waits for the clock's next second: git compares ctime by the second.)"""
    import time

    import agent_server.checkpoints.shadow as shadow

    monkeypatch.setattr(shadow, "RACY_NS", 0)  # nothing re-stat'ed for being recent: git's listing alone
    root = git_workspace(tmp_path)
    for name in ("plain.txt", "other.txt"):
        (root / name).write_text(f"{name}\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "t"], check=True)
    recorded = os.stat(root / "plain.txt").st_ctime_ns // 1_000_000_000
    while time.time_ns() < (recorded + 1) * 1_000_000_000 + 20_000_000:  # the next second, at most 1 s
        time.sleep(0.01)
    repo = ShadowRepo(tmp_path / "state" / "shadow.git", root, index=tmp_path / "state" / "index")
    blobs = BlobStore(tmp_path / "state" / "blobs")
    repo.snapshot()
    walks = _count_walks(monkeypatch, root)
    before = repo.snapshot()
    (root / "plain.txt").chmod(0o600)
    found = {c.path.name: c for c in repo.changes(before, repo.snapshot(), blobs)}
    assert set(found) == {"plain.txt"}, found
    assert (found["plain.txt"].before.mode, found["plain.txt"].after.mode) == (0o644, 0o600)
    assert walks == [], walks
