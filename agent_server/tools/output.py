"""Bounding a tool result for the model: trim the middle out, spill the whole to a file.

Role: ``trim_for_model`` cuts a result over the limit (8192 characters) to its head (4096) and
tail (1024) with a notice line in between that says how much was cut and how to get the rest;
``spill`` writes a full oversized output (``SPILL_THRESHOLD`` characters and more) to a private
file under the session folder so that notice can point at it. The pipeline calls both.

Must never: drop text without saying so — every cut leaves a notice the model can see.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path
from typing import BinaryIO

from .text import replace_surrogates

#: Default budget of one tool result, in characters.
TRIM_LIMIT = 8192
TRIM_HEAD = 4096
TRIM_TAIL = 1024
#: Outputs at least this long are worth spilling to a file (≈ 12 500 tokens).
SPILL_THRESHOLD = 50_000
#: Default of the most bytes one ``bash`` call writes to its spill file (``[agent] max_spill_bytes``).
SPILL_LIMIT_BYTES = 16 * 1024 * 1024
#: Default of the most bytes the spill files of one session hold (``[agent] max_session_spill_bytes``).
SESSION_SPILL_LIMIT_BYTES = 256 * 1024 * 1024
#: How far (characters) a cut may move to land on a line break.
_SNAP = 256

_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def trim_for_model(
    text: str,
    *,
    limit: int = TRIM_LIMIT,
    head: int = TRIM_HEAD,
    tail: int = TRIM_TAIL,
    spill_path: Path | str | None = None,
    spill_bytes: int | None = None,
    spill_dropped: int = 0,
) -> tuple[str, int]:
    """Bound ``text`` for the model. Returns ``(text, cut_chars)``; ``cut_chars`` is 0 when
    ``len(text) <= limit`` (the text comes back unchanged).

    Otherwise keeps about ``head`` characters from the start and ``tail`` from the end (each cut
    moved up to 256 characters to fall on a line break) and puts a notice line between them:
    how many characters were cut, and where the full text is (``spill_path``, holding
    ``spill_bytes`` bytes; ``spill_dropped``: bytes of the output that were not saved there) or how
    to see it.
    The result is at most ``head + tail`` plus the notice (≈ 300 characters).
    """
    if len(text) <= limit:
        return text, 0
    head = max(0, min(head, len(text)))
    tail = max(0, min(tail, len(text) - head))
    h_end = head
    nl = text.rfind("\n", max(0, head - _SNAP), head)
    if nl >= 0:
        h_end = nl + 1
    t_start = len(text) - tail
    nl = text.find("\n", t_start, min(len(text), t_start + _SNAP))
    if nl >= 0 and nl + 1 < len(text):
        t_start = nl + 1
    t_start = max(t_start, h_end)
    cut = t_start - h_end
    total = len(text)
    if spill_path is not None:
        if spill_dropped:
            first = f"first {spill_bytes:,} bytes" if spill_bytes is not None else "start"
            saved = (f"The {first} of the output are saved in {spill_path} "
                     f"({spill_dropped:,} bytes after them were dropped: the spill cap)")
        else:
            size = f" ({spill_bytes:,} bytes)" if spill_bytes is not None else ""
            saved = f"The full output{size} is saved in {spill_path}"
        how = f"{saved}: read it with `read` (offset/limit) or search it with `grep`."
    else:
        how = (
            "To see the rest, narrow the request (e.g. `read` with offset/limit, a more specific "
            "`grep`, or pipe a command through `head`, `tail`, `sed -n` or `grep`)."
        )
    head_text = text[:h_end]
    notice = (
        ("" if head_text.endswith("\n") or not head_text else "\n")
        + f"[… {cut:,} of {total:,} characters cut from the middle of this output "
        f"(results are limited to {limit:,} characters). {how}]\n"
    )
    return head_text + notice + text[t_start:], cut


def spill(text: str, spill_dir: Path | str, *, name: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to a new file ``<spill_dir>/<name>.txt`` and return its path.

    ``spill_dir`` is the session's spill folder (``<session_dir>/spill``); it is created with mode
    ``0700`` (and set to ``0700`` if it exists), the file with ``0600``. ``name`` is reduced to
    ``[A-Za-z0-9_.-]`` (default: a timestamp and random suffix); an existing name gets a numeric
    suffix, so nothing is overwritten. Raises ``OSError`` when the file cannot be written.
    """
    path, fh = open_spill_file(spill_dir, name=name)
    with fh:
        fh.write(replace_surrogates(text).encode("utf-8"))
    return path


def spill_room(spill_dir: Path | str, budget: int) -> int:
    """Bytes ``budget`` leaves beside the files already in ``spill_dir`` (0 when used up; the whole
    budget when the folder does not exist yet). Spill files are never pruned: the log and the
    model's history point at them, so once the budget is used up further outputs are not saved."""
    used = 0
    try:
        with os.scandir(spill_dir) as entries:
            for entry in entries:
                try:
                    used += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    pass
    except FileNotFoundError:
        return budget
    return max(0, budget - used)


def open_spill_file(spill_dir: Path | str, *, name: str | None = None) -> tuple[Path, BinaryIO]:
    """Create a new private spill file (as ``spill`` does) and return ``(path, binary file)``
    for a writer that streams into it (e.g. a command's whole output). The caller closes it."""
    folder = Path(spill_dir)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    stem = _NAME_RE.sub("_", name).strip("._")[:100] if name else ""
    if not stem:
        stem = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(4)
    for n in range(1000):
        path = folder / (f"{stem}.txt" if n == 0 else f"{stem}-{n}.txt")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        os.chmod(path, 0o600)
        return path, os.fdopen(fd, "wb")
    raise FileExistsError(f"no free spill file name for {stem!r} in {folder}")

