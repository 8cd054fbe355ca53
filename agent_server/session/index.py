"""A small index of the stored sessions beside their logs, for ``session/list``.

Role: ``SessionIndex(root).entries()`` says, for every log under ``root`` (``<state>/sessions``),
its ``cwd``, extra folders, whether it had a prompt, the title (the first prompt's first line),
its creation time, last write and size — without reading every log on every call. The index file
``root/index.json`` keeps what was read, keyed by session id with the log's ``(mtime_ns, size)``;
an entry whose stamp still matches is reused, a stale or missing one is read again from its log
(only the header and up to the first prompt), and entries of deleted sessions are dropped. A log
that grew after its first prompt needs no re-read: its header and first prompt never change, only
its stamp is refreshed (in memory: the file is not rewritten for that alone). The file is rewritten
(write, ``fsync``-free rename) when an entry was read, added or dropped;
a missing, unreadable or foreign file is rebuilt from the logs. Several processes may share a
store: each validates every entry by its stamp, so a stale file costs a re-read, never a wrong list.

Must never: change a log, or trust the index over a log's stamp.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_server.session.events import LogCorruptError, LogVersionError, SessionEvent, read_head

log = logging.getLogger("agent_server.session")

INDEX_NAME = "index.json"
INDEX_VERSION = 1
TITLE_CHARS = 80
"""Longest title: the first line of the first prompt, cut with an ellipsis."""


@dataclass(frozen=True)
class IndexEntry:
    """One stored session as ``session/list`` shows it. ``updated``: the log's last write (epoch
    seconds); ``created``: its header's time; ``size``: the log's bytes; ``prompted``: whether it
    had a prompt; ``title``: ``None`` before a prompt with text."""

    session_id: str
    cwd: str
    additional_directories: tuple[str, ...]
    title: str | None
    prompted: bool
    created: float
    updated: float
    size: int


def session_title(first_user: SessionEvent | None) -> str | None:
    """The first non-blank line of the first text block of the first prompt, cut to
    ``TITLE_CHARS`` with ``…``; ``None`` when there is no prompt yet (or it has no text)."""
    if first_user is None:
        return None
    texts = [b.get("text", "") for b in first_user.data.get("blocks") or [] if b.get("type") == "text"]
    source = "\n".join(texts) if texts else str(first_user.data.get("content", ""))
    line = next((ln.strip() for ln in source.splitlines() if ln.strip()), "")
    if not line:
        return None
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1].rstrip() + "…"


class SessionIndex:
    """The index of the sessions under ``root`` (see the module docstring). One object may be kept
    for the life of a process: it keeps the entries in memory between calls."""

    def __init__(self, root: Path, id_ok: Any = None) -> None:
        self.root = Path(root)
        self.path = self.root / INDEX_NAME
        self._id_ok = id_ok or (lambda name: not name.startswith("."))
        self._known: dict[str, dict[str, Any]] | None = None
        self._made: dict[str, tuple[list[int], IndexEntry]] = {}  # entries already built, by stamp
        self._ordered: list[IndexEntry] | None = None
        self._unsaved: dict[str, dict[str, Any]] | None = None
        self._saving = threading.Lock()  # one writer of the file at a time (a save may run in a thread)
        self.reads = 0
        """Logs read (head only) by this object: what a stale or missing index cost."""

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_bytes())
            if isinstance(data, dict) and data.get("version") == INDEX_VERSION and isinstance(data.get("sessions"), dict):
                return {k: v for k, v in data["sessions"].items() if isinstance(v, dict)}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            log.info("session index %s unreadable (%s): rebuilt from the logs", self.path, exc)
        return {}

    def _save(self, known: dict[str, dict[str, Any]]) -> None:
        tmp = self.root / f".{INDEX_NAME}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            # one string, by the C encoder (json.dump streams through the pure-Python one: 2,000
            # entries took 3 × longer), written at once
            text = json.dumps({"version": INDEX_VERSION, "sessions": known}, ensure_ascii=False, separators=(",", ":"))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except OSError as exc:  # a read-only or full disk: the list is still right, only slower next time
            log.info("session index %s not written: %s", self.path, exc)
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def _read(self, log_path: str) -> dict[str, Any] | None:
        self.reads += 1
        try:
            header, first = read_head(Path(log_path), lambda e: e.type == "user")
        except (LogCorruptError, LogVersionError, OSError) as exc:
            log.debug("session index: skipping %s: %s", log_path, exc)
            return None
        folder = header.data.get("cwd")
        if not isinstance(folder, str):
            return None
        extra = header.data.get("additional_directories") or []
        return {"cwd": folder, "dirs": [str(d) for d in extra] if isinstance(extra, list) else [],
                "title": session_title(first), "prompted": first is not None, "created": header.time}

    def save(self) -> None:
        """Write what ``entries(defer_save=True)`` left unsaved (nothing when nothing is)."""
        with self._saving:
            unsaved, self._unsaved = self._unsaved, None
            if unsaved is not None:
                self._save(unsaved)

    def entries(self, defer_save: bool = False) -> list[IndexEntry]:
        """Every readable stored session, newest first by ``(updated, session id)``; refreshes and
        saves the index as needed (the same list again while no log changed). ``defer_save``: the
        file is written by ``save()``, later (after a ``session/list`` answer has left: encoding
        2,000 entries was a third of the first page's time)."""
        loaded = self._known is not None
        known = self._known if loaded else self._load()
        fresh: dict[str, dict[str, Any]] = {}
        changed = not loaded and not self.path.exists()
        refreshed = False  # only the stamps of logs appended to after their first prompt changed
        root = str(self.root)
        try:
            names = os.listdir(root)
        except (FileNotFoundError, NotADirectoryError):
            self._known, self._made, self._ordered = {}, {}, []
            return []
        for name in names:
            old = known.get(name)
            if old is None and not self._id_ok(name):
                continue
            log_path = f"{root}/{name}/events.jsonl"
            try:
                st = os.stat(log_path)
            except OSError:
                continue
            stamp = [st.st_mtime_ns, st.st_size]
            if old is not None and old.get("stamp") == stamp:
                fresh[name] = old
                continue
            if old is not None and old.get("prompted") and isinstance(old.get("stamp"), list) \
                    and st.st_size > old["stamp"][1]:
                # appended to: header and first prompt unchanged — the new stamp is kept in memory;
                # the file is not rewritten for it (another process refreshes it as cheaply)
                fresh[name] = {**old, "stamp": stamp}
                refreshed = True
                continue
            changed = True
            info = self._read(log_path)  # None: unreadable, kept so it is not read again until it changes
            fresh[name] = {**(info or {"bad": True}), "stamp": stamp}
        if len(fresh) != len(known):
            changed = True
        self._known = fresh
        if changed and defer_save:
            self._unsaved = fresh  # never changed in place: each call makes a new one
        elif changed:
            self._unsaved = None
            with self._saving:
                self._save(fresh)
        elif loaded and not refreshed and self._ordered is not None:
            return self._ordered
        elif self._unsaved is not None:
            self._unsaved = fresh  # the same entries, the newer stamps
        made: dict[str, tuple[list[int], IndexEntry]] = {}
        for sid, e in fresh.items():
            if e.get("bad"):
                continue
            old_made = self._made.get(sid)
            if old_made is not None and old_made[0] == e["stamp"]:
                made[sid] = old_made
            else:
                made[sid] = (e["stamp"], IndexEntry(sid, e["cwd"], tuple(e.get("dirs") or ()), e.get("title"),
                                                    bool(e.get("prompted")), float(e.get("created") or 0.0),
                                                    e["stamp"][0] / 1e9, e["stamp"][1]))
        self._made = made
        self._ordered = sorted((m[1] for m in made.values()), key=lambda e: (e.updated, e.session_id), reverse=True)
        return self._ordered


__all__ = ["INDEX_NAME", "IndexEntry", "SessionIndex", "TITLE_CHARS", "session_title"]
