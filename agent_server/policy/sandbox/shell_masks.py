"""What the confined shell must not see, and what it must not leave behind.

Role: ``credential_paths(patterns, env)`` lists stored credentials outside the workspace that the
shell's mount namespace hides: the agent-server config file and folder (``api_key``, the key
``agent-server login`` stored), the state folder (every session's log), keyring files, and
well-known secret files in the home folder
(``HOME_SECRETS``) plus the configured path patterns (``~/.ssh/**`` …), each in any case (``any_case``);
``named_credential_paths()`` the files credential-path variables and ssh's ``IdentityFile`` name. ``SecretScanner`` finds the
files inside the roots whose *name* matches a secret pattern (``.env*``, ``*.pem`` …, any case), re-listing
only folders whose modification time changed since the last scan. ``sweep_setuid(roots)`` removes
setuid/setgid bits from every file under the roots after a confined command ended
(``SetuidSweeper``: the same per session, searching a big tree with ``find``).

Must never: follow a symlink out of a root while scanning or sweeping, or hide a workspace root.
Known limits: a name pattern (no ``/``) is searched for inside the roots only, and not inside
``SCAN_SKIP`` folders (``node_modules``, ``.venv`` …); at most ``MAX_SECRET_FILES`` files are hidden
(those older than the session first; past that the policy asks about every command).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Mapping, Sequence

from agent_server.policy.paths import HOME_CREDENTIALS

#: Secret files and folders in the home folder that the confined shell never sees: the file tools'
#: credential stores (one list), relative to home.
HOME_SECRETS = tuple(item[2:] for item in HOME_CREDENTIALS)
MAX_SECRET_FILES = 1000
#: Secret-named files listed at most per scan and kind (older, newer) before the scan stops.
MAX_SCANNED = 50 * MAX_SECRET_FILES
#: Folders the secret scan does not enter: ``.git`` (read-only in the sandbox) and third-party
#: dependency and cache folders (their many sub-folders would be stat-ed on every call).
SCAN_SKIP = frozenset({".git", "node_modules", ".venv", "venv", "site-packages", "__pycache__", ".tox", ".nox",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def _glob_chars(text: str) -> bool:
    return any(c in text for c in "*?[")


def named_credential_paths(roots: Sequence[Path | str] = (), env: Mapping[str, str] | None = None) -> list[str]:
    """Resolved paths (existing ones only) of the files and folders the user's set-up names as
    credentials (``policy.paths.named_credentials``: what credential-path variables of ``env``
    — default: the server's — point to, ``$GOOGLE_APPLICATION_CREDENTIALS`` …, and the keys ssh's
    ``IdentityFile`` names), none naming a root or a folder above one: protected, as ``~/.ssh`` —
    hidden from every confined command."""
    from agent_server.policy.paths import named_credentials

    out: list[str] = []
    for path, _ in named_credentials(roots, env):
        real = os.path.realpath(path)
        if os.path.lexists(path) and real not in out:
            out.append(real)
    return out


def credential_paths(patterns: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """Absolute paths (existing ones only) of stored credentials outside the roots, to hide."""
    env = os.environ if env is None else env
    home = env.get("HOME") or os.path.expanduser("~")
    listings: dict[str, list[str]] = {}
    found: list[str] = []
    for rel in HOME_SECRETS:
        found += any_case(home, rel, listings)
    from agent_server.config.load import default_config_path
    from agent_server.policy.paths import relocated_credentials
    from agent_server.session.store import default_state_dir

    found.append(str(default_config_path(env)))
    found.append(str(default_config_path(env).parent))  # the folder: credentials.json of `agent-server login`
    found.extend(relocated_credentials(env))
    if env.get("AGENT_SERVER_CONFIG"):
        found.append(env["AGENT_SERVER_CONFIG"])
    found.append(str(default_state_dir(env)))
    import glob

    from agent_server.policy.paths import SYSTEM_CREDENTIALS

    for item in SYSTEM_CREDENTIALS:  # /etc/shadow, host keys …: refused to the file tools, hidden here
        found += glob.glob(item) if _glob_chars(item) else [item]
    for pattern in patterns:
        if "/" not in pattern:
            continue
        base, rel = (home, pattern[1:]) if pattern.startswith("~") else ("/", pattern)
        rel = rel[:-3] if rel.endswith("/**") else rel
        found += any_case(base, rel, listings)[:MAX_SECRET_FILES]
    out: list[str] = []
    for path in found:
        real = os.path.realpath(path)
        if os.path.lexists(path) and real not in out:
            out.append(real)
    return out


def any_case(base: str, rel: str, listings: dict[str, list[str]] | None = None) -> list[str]:
    """``base/rel`` as written, and every existing path under ``base`` that ``rel`` names in any case
    (``.SSH/ID_RSA`` for ``.ssh/id_rsa``): the file tools judge names in any case (a case-folding
    filesystem opens ``~/.SSH`` as ``~/.ssh``), so the shell hides what they refuse. ``rel`` may hold
    the path-pattern globs (``*``, ``?``, ``[…]`` within a name, ``**`` any depth, hidden names
    too). ``listings``: folder listings already read (shared by one caller's calls)."""
    listings = {} if listings is None else listings
    parts = [p for p in rel.split("/") if p and p != "."]
    out = [] if _glob_chars(rel) else [os.path.normpath(os.path.join(base, *parts))]
    current = [base]
    for part in parts:
        found: list[str] = []
        if part == "**":
            for folder in current:
                found.append(folder)
                for top, dirs, _ in os.walk(folder):
                    found += [os.path.join(top, d) for d in dirs]
                    if len(found) > MAX_SCANNED:
                        break
        else:
            wanted = re.compile(fnmatch.translate(part), re.IGNORECASE) if _glob_chars(part) else None
            folded = part.casefold()
            for folder in current:
                if folder not in listings:
                    try:
                        listings[folder] = os.listdir(folder)
                    except OSError:
                        listings[folder] = []
                found += [os.path.join(folder, name) for name in listings[folder]
                          if (wanted.match(name) if wanted is not None else name.casefold() == folded)]
        current = found[:MAX_SCANNED]
        if not current:
            break
    return out + [p for p in current if p not in out]


#: A folder whose ctime is this close to the look is listed again next time (coarse timestamps).
RACY_NS = 50_000_000


class SecretScanner:
    """Finds files named like a secret (the name patterns of ``patterns``) inside the roots.

    ``scan(roots)`` returns their resolved paths (regular files, or symlinks to files anywhere;
    folders are never hidden: a virtualenv called ``.env`` keeps working), at most
    ``MAX_SECRET_FILES``: the files that existed before ``since_ns`` (the session's start, by their
    change time, which no program can set back) first, then the newer ones — files the session made
    never push a real secret out of the masks (issue 32 §2: 1,001 decoys ``-0.pem`` … did). When the
    older ones alone pass the limit, ``overflow`` says how many stay visible (the policy asks then).
    Folder listings are cached by the folder's identity (device, inode, ctime, mtime; not one changed
    within ``RACY_NS`` of the look), so a repeated scan costs one ``stat`` per folder.
    """

    def __init__(self, patterns: Sequence[str], since_ns: int | None = None) -> None:
        self.names = [p.lower() for p in patterns if "/" not in p]  # matched in any case, as policy does
        self.since_ns = time.time_ns() if since_ns is None else since_ns
        self.overflow = 0
        self._cache: dict[str, tuple[tuple[int, ...], list[tuple[str, int]], list[str]]] = {}

    def _list(self, folder: str) -> tuple[list[tuple[str, int]], list[str]]:
        now = time.time_ns()
        try:
            st = os.stat(folder)
        except OSError:
            return [], []
        # by ctime too: a command can set a folder's mtime back after renaming a secret's folder
        # away (then the next scan kept the old listing and the secret went unmasked); no
        # program can set ctime back
        ident = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
        cached = self._cache.get(folder)
        if cached is not None and cached[0] == ident:
            return cached[1], cached[2]
        hits, subdirs = [], []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name not in SCAN_SKIP:
                                subdirs.append(entry.path)
                        elif any(fnmatch.fnmatchcase(entry.name.lower(), n) for n in self.names) and \
                                entry.is_file(follow_symlinks=True):
                            hits.append((entry.path, entry.stat(follow_symlinks=False).st_ctime_ns))
                    except OSError:
                        continue
        except OSError:
            return [], []
        if now - st.st_ctime_ns > RACY_NS:  # a change in the same clock tick would keep the identity
            self._cache[folder] = (ident, hits, subdirs)
        return hits, subdirs

    def scan(self, roots: Sequence[Path | str]) -> list[str]:
        """Resolved paths of the secret-named files under ``roots`` (at most ``MAX_SECRET_FILES``,
        those older than the session first); sets ``overflow``."""
        self.overflow = 0
        if not self.names:
            return []
        old: list[str] = []
        new: list[str] = []
        stack = [os.path.realpath(r) for r in roots]
        seen: set[str] = set()
        while stack:
            folder = stack.pop()
            if folder in seen:
                continue
            seen.add(folder)
            hits, subdirs = self._list(folder)
            for path, ctime in hits:
                (old if ctime < self.since_ns else new).append(path)
            if len(old) > MAX_SCANNED or len(new) > MAX_SCANNED:
                break  # never a walk without end: what is left unlisted is told as overflow
            stack.extend(subdirs)
        older = sorted({os.path.realpath(h) for h in old})
        self.overflow = max(0, len(older) - MAX_SECRET_FILES)
        if stack:  # stopped early: folders not looked into may hold real secrets
            self.overflow = max(self.overflow, 1)
        newer = sorted({os.path.realpath(h) for h in new} - set(older))
        return (older + newer)[:MAX_SECRET_FILES]


def sweep_setuid(roots: Sequence[Path | str], skip: Sequence[str] = ()) -> list[str]:
    """Clear ``S_ISUID``/``S_ISGID`` on every non-folder under ``roots`` (not following symlinks,
    skipping the folders in ``skip``, e.g. the read-only ``.git``); returns the paths changed."""
    return _walk_and_clear(roots, skip)[0]


def _walk_and_clear(roots: Sequence[Path | str], skip: Sequence[str]) -> tuple[list[str], int]:
    fixed: list[str] = []
    entries = 0
    skipped = {os.path.realpath(s) for s in skip}
    stack = [os.path.realpath(r) for r in roots]
    seen: set[str] = set()
    while stack:
        folder = stack.pop()
        if folder in seen or folder in skipped:
            continue
        seen.add(folder)
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    entries += 1
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
                    elif stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                        if _clear_bits(entry.path, st):
                            fixed.append(entry.path)
        except OSError:
            continue
    return fixed, entries


FIND_ABOVE = 2000
"""A tree whose last sweep saw more entries than this is searched with ``find`` (C; several times
faster, and it does not hold the GIL the event loop needs)."""


class SetuidSweeper:
    """``sweep_setuid`` for one session's calls: the same search and clearing, but a big tree (the
    previous sweep saw more than ``FIND_ABOVE`` entries) is searched with ``find -P … -perm /6000``
    (no symlink followed, ``skip`` pruned); each hit is then cleared as by ``sweep_setuid`` (only if
    it is still the same regular file). Without a working ``find``, the Python walk is used."""

    def __init__(self) -> None:
        self.entries = 0
        self.find = shutil.which("find")

    def __call__(self, roots: Sequence[Path | str], skip: Sequence[str] = ()) -> list[str]:
        if self.entries > FIND_ABOVE and self.find is not None:
            hits = _find_setuid(self.find, roots, skip)
            if hits is not None:
                fixed = []
                for path in hits:
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID) and \
                            _clear_bits(path, st):
                        fixed.append(path)
                return fixed
        fixed, self.entries = _walk_and_clear(roots, skip)
        return fixed


def _glob_escape(path: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in path)


def _find_setuid(find: str, roots: Sequence[Path | str], skip: Sequence[str]) -> list[str] | None:
    """Paths of setuid/setgid regular files under ``roots`` found by ``find`` (``None``: it could
    not run or was killed; a folder it cannot read is skipped, as in the walk)."""
    real = list(dict.fromkeys(os.path.realpath(r) for r in roots))
    prune: list[str] = []
    for folder in dict.fromkeys(os.path.realpath(s) for s in skip):
        prune += (["-o"] if prune else []) + ["-path", _glob_escape(folder)]
    expr = (["(", *prune, ")", "-prune", "-o"] if prune else []) + ["-type", "f", "-perm", "/6000", "-print0"]
    try:
        done = subprocess.run([find, "-P", *real, *expr], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, env={"LC_ALL": "C"}, check=False)
    except OSError:
        return None
    if done.returncode not in (0, 1):
        return None
    return list(dict.fromkeys(os.fsdecode(p) for p in done.stdout.split(b"\0") if p))


def _clear_bits(path: str, seen: os.stat_result) -> bool:
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino) or not stat.S_ISREG(now.st_mode):
            return False
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(now.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
