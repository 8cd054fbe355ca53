"""Removes the folders of earlier scripts/try-vscode.sh (or try-neovim.sh) runs but the last few (each
run left a workspace copy, the server's state and code-server's user data under
~/.cache/agent-server/try-vscode/, or ~/.cache/agent-server/try-neovim/).

    prune_try_runs.py RUNS_DIR [--keep N] [--except PATH] [--kind vscode|neovim]

(`prune_old_demo_state`: what try-neovim.sh runs before e9cf9e6 left in the clone's .demo-state.)

Role: a run's folder is one the script made (`vscode-XXXXXX` holding the run's `config.json`;
`neovim-XXXXXXXX` holding its `try-neovim.json`), not a symbolic link; the newest N of them (by
modification time; `--except`, the run starting now, is never counted nor touched) are kept, and any
older one is removed unless it is in use.
Must never: remove a folder still in use — a live process of that run (`TRY_VSCODE_RUN=<folder>`,
`TRY_NEOVIM_RUN=<folder>` in its environment: code-server, Neovim, the agent-server they started, a
terminal's shell), or any process whose
working directory, root, executable, an open file or a path on its command line is inside it (an
editor or shell the user opened there) —, anything that is not a run's folder, or anything outside
RUNS_DIR (links are not followed).
Linux /proc only; processes this user may not inspect (kernel threads, a non-dumpable process) are
not looked at.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

RUN_NAME = re.compile(r"^vscode-[A-Za-z0-9]{6}$")

KINDS = {
    # kind: (a run folder's name, the file a run writes first, a string that file holds, the run's mark)
    "vscode": (RUN_NAME, "config.json", '"codeServerEntry"', "TRY_VSCODE_RUN"),
    "neovim": (re.compile(r"^neovim-[A-Za-z0-9_]{8}$"), "try-neovim.json", '"plugin"', "TRY_NEOVIM_RUN"),
}


def run_folders(runs: Path, kind: str = "vscode") -> list[Path]:
    """The run folders under ``runs``, newest first."""
    name, config_file, holds, _ = KINDS[kind]
    found = []
    for entry in runs.iterdir():
        if not name.match(entry.name) or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            config = (entry / config_file).read_text(errors="replace")
        except OSError:
            continue  # not (yet) a run's: a run writes it before it starts anything
        if holds not in config:
            continue
        found.append(entry)
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _inside(path: str, folders: list[str]) -> str | None:
    for folder in folders:
        if path == folder or path.startswith(folder + "/"):
            return folder
    return None


def folders_in_use(folders: list[Path], kind: str = "vscode") -> set[str]:
    """Which of ``folders`` a live process uses (marked with its run, or its cwd/root/exe/open files
    inside it)."""
    names = [str(f) for f in folders]
    marks = {f"{KINDS[kind][3]}={name}".encode(): name for name in names}
    used: set[str] = set()
    me, uid = os.getpid(), os.getuid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        base = f"/proc/{pid}"
        try:
            if os.stat(base).st_uid != uid and uid != 0:
                continue  # another user's process cannot hold our folders open
            env = Path(f"{base}/environ").read_bytes().split(b"\0")
            argv = Path(f"{base}/cmdline").read_bytes().split(b"\0")
            fds = os.listdir(f"{base}/fd")
        except OSError:
            # ended meanwhile; a kernel thread (ESRCH); a process this user may not inspect (EACCES:
            # not dumpable, an init of another namespace): none is a user's editor or shell
            continue
        used.update(name for mark, name in marks.items() if mark in env)
        targets = []
        for link in ["cwd", "root", "exe", *(f"fd/{fd}" for fd in fds)]:
            try:
                targets.append(os.readlink(f"{base}/{link}").removesuffix(" (deleted)"))
            except OSError:
                continue  # a kernel thread's exe, a descriptor closed meanwhile
        # a file named on its command line (an editor that read it and holds nothing open: vim, nano)
        try:
            cwd = os.readlink(f"{base}/cwd")
        except OSError:
            cwd = "/"
        targets += [os.path.normpath(os.path.join(cwd, os.fsdecode(arg))) for arg in argv if arg]
        for target in targets:
            hit = _inside(target, names)
            if hit:
                used.add(hit)
    return used


def _remove(path: Path) -> None:
    def writable_and_retry(func, name, _exc):  # a read-only folder (a module cache) is still ours
        parent = os.path.dirname(name)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        if os.path.isdir(name) and not os.path.islink(name):
            os.chmod(name, os.stat(name).st_mode | stat.S_IWUSR | stat.S_IXUSR | stat.S_IRUSR)
        func(name)

    shutil.rmtree(path, onerror=writable_and_retry)


def prune(runs: Path, keep: int, current: Path | None = None,
          kind: str = "vscode") -> tuple[list[Path], list[Path]]:
    """Removes the run folders past the newest ``keep`` that are not in use; returns (removed, kept in use)."""
    skip = current.resolve() if current is not None else None
    folders = [f for f in run_folders(runs, kind) if skip is None or f.resolve() != skip]
    old = folders[keep:]
    if not old:
        return [], []
    return _remove_unused(old, kind)


def _remove_unused(old: list[Path], kind: str) -> tuple[list[Path], list[Path]]:
    """Removes each of the run folders ``old`` that no process of a ``kind`` run uses; returns
    (removed, kept in use). One that cannot be removed is said on stderr and left."""
    used = folders_in_use(old, kind) if old else set()
    removed, busy = [], []
    for folder in old:
        if str(folder) in used:
            busy.append(folder)
            continue
        try:
            _remove(folder)
        except OSError as exc:
            print(f"try-{kind}: could not remove {folder}: {exc}", file=sys.stderr)
            continue
        removed.append(folder)
    return removed, busy


OLD_NEOVIM_RUN = re.compile(r"^nvim-workspace-[0-9]{8}-[0-9]{6}-[0-9]+$")
"""A workspace copy of a ``try-neovim.sh`` run before e9cf9e6, in the clone's ``.demo-state``
(``nvim-workspace-<date>-<time>-<pid>``: that script's ``write_project`` folder)."""


def _demo_project(folder: Path) -> bool:
    """Whether ``folder`` holds the demo project a run copied (its files, whatever the agent did)."""
    from agent_server.offline.demo_task import PROJECT_FILES

    return all((folder / name).is_file() and not (folder / name).is_symlink() for name in PROJECT_FILES)


def prune_old_demo_state(demo_state: Path) -> tuple[list[Path], list[Path]]:
    """Removes what ``try-neovim.sh`` runs before e9cf9e6 left in the clone's ``.demo-state`` (the
    state folder they shared with ``demo_client.py``): each run's workspace copy
    (``OLD_NEOVIM_RUN``, holding the demo project), the sessions whose ``cwd`` was such a copy (gone
    now), and their ``try-neovim.json`` when it names one. Anything else there — the demo client's
    ``workspace-*`` copies and sessions, the shared offline script — is kept, as is a copy in use
    (and its sessions) or a session whose log is open. Returns (removed, kept in use)."""
    if not demo_state.is_dir() or demo_state.is_symlink():
        return [], []
    old = sorted(entry for entry in demo_state.iterdir() if OLD_NEOVIM_RUN.match(entry.name)
                 and not entry.is_symlink() and entry.is_dir() and _demo_project(entry))
    removed, busy = _remove_unused(old, "neovim")

    def was_a_run(cwd: object) -> bool:
        path = Path(cwd) if isinstance(cwd, str) else None
        return (path is not None and path.parent == demo_state and OLD_NEOVIM_RUN.match(path.name) is not None
                and not os.path.lexists(path))

    removed += _remove_sessions(demo_state, was_a_run)
    config = demo_state / "try-neovim.json"
    try:
        named = json.loads(config.read_text()).get("workspace") if config.is_file() and not config.is_symlink() else None
    except (OSError, ValueError, AttributeError):
        named = None
    if was_a_run(named):
        config.unlink()
        removed.append(config)
    return removed, busy


def _remove_sessions(state: Path, theirs) -> list[Path]:
    """Deletes the sessions of ``state`` whose ``cwd`` is ``theirs(cwd)`` (as ``session/delete``
    does: a log another process holds open is kept); the removed session folders."""
    from agent_server.checkpoints.recorder import prune_shadows
    from agent_server.session.events import LogBusyError, read_head
    from agent_server.session.store import SessionStore

    store, removed = SessionStore(state), []
    for log in sorted(state.glob("sessions/*/events.jsonl")):
        try:
            header, _ = read_head(log, lambda _event: False)
        except Exception:  # noqa: BLE001 - not readable: not recognisably one of theirs
            continue
        if not theirs(header.data.get("cwd")):
            continue
        try:
            store.delete(log.parent.name)
        except (LogBusyError, OSError, ValueError) as exc:
            print(f"try-neovim: kept session {log.parent.name}: {exc}", file=sys.stderr)
            continue
        removed.append(log.parent)
    if removed:
        store.listing()  # the index drops the deleted sessions
        prune_shadows(state)  # their checkpoints, as session/delete does
    return removed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--except", dest="current", type=Path)
    parser.add_argument("--kind", choices=sorted(KINDS), default="vscode")
    args = parser.parse_args(argv)
    if args.keep < 0:
        parser.error("--keep must be 0 or more")
    if not args.runs.is_dir():
        return 0
    removed, busy = prune(args.runs.resolve(), args.keep, args.current, args.kind)
    if removed:
        kept = f" (the last {args.keep} are kept)" if args.keep else ""
        print(f"Removed {len(removed)} earlier run folder(s) under {args.runs}{kept}.")
    for folder in busy:
        print(f"Kept {folder}: still in use.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
