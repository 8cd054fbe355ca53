"""The bytes of a session log line, and the creation of a new log file: standard library only.

Role: what ``EventLog`` (``session/events.py``) and the CLI's pre-asyncio ``session/new`` fast path
(``server/acp/fast_session.py``) share, so both write the same ``session/header`` line the same way:

Must never: import anything of ours or anything heavier than the standard library (the fast path
runs before ``asyncio`` and pydantic load); keep a second format of the line.

* ``event_line(type, seq, time, data)`` → ``b'{"type":…,"seq":…,"time":…,"data":{…}}\\n'``: canonical
  JSON (UTF-8, no spaces, no ``NaN``), what ``SessionEvent.to_line`` writes;
* ``strict_json(value)``: a copy UTF-8 strict JSON can hold (lone surrogates → U+FFFD, non-finite
  numbers → ``null``);
* ``create_log(path, header)`` → ``(fd, line)``: a new ``events.jsonl`` (``0600``, exclusive create,
  under the one-writer ``flock``) holding the ``session/header`` line (seq 1), ``fsync``\\ed with its
  folder before it returns;
* ``new_session_id()``, ``default_state_dir()`` and ``make_store_folders(root)``: the id, the state
  folder and the private ``0700`` folders of ``SessionStore``.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any, Mapping

FORMAT_VERSION = 1
"""Version of the log format, written in ``session/header.data.format_version``."""

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def strict_json(value: Any) -> Any:
    """A copy of ``value`` that strict JSON in UTF-8 can hold: lone surrogates in strings (and
    keys) become U+FFFD, ``NaN``/``±Infinity`` become ``None``."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {strict_json(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def event_line(type: str, seq: int, time: float, data: dict[str, Any]) -> bytes:
    """One JSONL line (UTF-8, no embedded newline, ``\\n``-terminated) of the event.

    Raises ``ValueError`` (``UnicodeEncodeError`` included) for text UTF-8 cannot carry or
    non-finite numbers: pass ``strict_json(data)`` then.
    """
    obj = {"type": type, "seq": seq, "time": time, "data": data}
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$AGENT_SERVER_STATE_DIR``, else the platform's user state folder for ``agent-server``."""
    env = os.environ if env is None else env
    if env.get("AGENT_SERVER_STATE_DIR"):
        return Path(env["AGENT_SERVER_STATE_DIR"])
    import platformdirs

    return Path(platformdirs.user_state_dir("agent-server"))


def new_session_id() -> str:
    """A fresh session id: ``sess_`` + the 32 hex digits of a random (version 4) UUID — built
    as ``uuid.uuid4().hex`` is, without importing ``uuid`` (and ``platform``) on the fast path."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return f"sess_{raw.hex()}"


def make_store_folders(root: Path) -> None:
    """Make the state folder and its ``sessions/`` folder ``root`` (``0700`` when new)."""
    for folder in (root.parent, root):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)


def make_private_dir(path: Path) -> None:
    """Make ``path`` (and missing parents) and set it ``0700``."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def create_log(path: Path, header: dict[str, Any]) -> tuple[int, bytes]:
    """Create the log ``path`` holding its ``session/header`` event (seq 1, now); returns
    ``(fd, line)``: the descriptor, opened for appending and holding the exclusive ``flock``
    (give it to ``EventLog(path, [event], fd)``; closing it drops the lock), and the line written.

    ``header``: the header's data without ``format_version``, which comes first. Before this
    returns the line is ``fsync``\\ed, and so is the folder (the new file's entry). The folder is
    made ``0700``, the file ``0600``. Raises ``FileExistsError`` (nothing is touched), or
    ``OSError`` (disk full …: the file is removed again).
    """
    path = Path(path)
    make_private_dir(path.parent)
    data = {"format_version": FORMAT_VERSION, **header}
    now = time.time()
    try:
        line = event_line("session/header", 1, now, data)
    except ValueError:  # UnicodeEncodeError included
        line = event_line("session/header", 1, now, strict_json(data))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and exclusive: nobody else holds it
        os.fchmod(fd, 0o600)
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    return fd, line
