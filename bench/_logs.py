"""Long session logs for the benchmark, grown from a real one.

Role: take a log the real server wrote (the read scenario's: header, one turn of two steps and a
tool call) and repeat its turn until the log has the wanted number of events or bytes, renumbering
``seq`` and ``turn``, making every model call id unique per copy and moving each editor call id
(``tc-<seq of its tool/call>``) with its call. Every line keeps the exact shape the
server writes, so parsing and projecting it costs what a real long session costs.

Must never: write into a live session's folder (it writes only where it is told).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any


def _ids(events: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for event in events:
        data = event["data"]
        if isinstance(data.get("call_id"), str):
            found.add(data["call_id"])
    return found


def grow_log(template: Path, out_dir: Path, *, events: int | None = None, size: int | None = None,
             cwd: str | None = None, repeat_from: int = 1, replace: dict[str, str] | None = None) -> tuple[str, Path]:
    """Write ``out_dir/sessions/<new id>/events.jsonl``: the header of ``template`` (new session
    id, ``cwd`` if given) and copies of its turns until ``events`` events or ``size`` bytes.
    ``repeat_from``: the first turn repeated (the turns before it are kept once, as the head: a
    first turn that logged the ``request/header`` a session logs once).

    ``cwd``: the grown session's folder, named instead of the template's wherever the template named
    it (the header, the system text of its ``request/header``, tool results), as a session started
    there would name it. ``replace``: other strings of the template named otherwise (an endpoint's
    URL: the session as it would be loaded against the endpoint it talked to).

    Returns ``(session id, path)``. Raises ``ValueError`` when ``template`` has no closed turn.
    """
    lines = template.read_text(encoding="utf-8").splitlines()
    parsed = [json.loads(line) for line in lines]
    first_turn = [i for i, e in enumerate(parsed) if e["type"] == "turn/start"][repeat_from - 1]
    last_end = max(i for i, e in enumerate(parsed) if e["type"] == "turn/end")
    if last_end < first_turn:
        raise ValueError(f"{template}: no closed turn to repeat")
    head, turn = parsed[:first_turn], parsed[first_turn:last_end + 1]
    ids = sorted(_ids(turn), key=len, reverse=True)
    id_pattern = re.compile("|".join(re.escape(f'"{i}"') for i in ids)) if ids else None
    session_id = f"sess_{uuid.uuid4().hex}"
    header = dict(head[0], data=dict(head[0]["data"], session_id=session_id))
    renames = dict(replace or {})
    if cwd:
        before = header["data"].get("cwd")
        if isinstance(before, str) and before:  # the system text and results name it too
            renames[before] = cwd
        header["data"]["cwd"] = cwd
    moves = [(json.dumps(a, ensure_ascii=False)[1:-1], json.dumps(b, ensure_ascii=False)[1:-1])
             for a, b in renames.items() if a and a != b]
    folder = out_dir / "sessions" / session_id
    folder.mkdir(parents=True, mode=0o700)
    path = folder / "events.jsonl"
    seq = written = 0
    copy = repeat_from - 1
    with path.open("w", encoding="utf-8") as fh:
        for event in [header, *head[1:]]:
            seq += 1
            line = json.dumps(dict(event, seq=seq), ensure_ascii=False, separators=(",", ":"))
            for moved in moves:
                line = line.replace(*moved)
            fh.write(line + "\n")
            written += len(line) + 1
        while (events is None or seq < events) and (size is None or written < size):
            copy += 1
            for event in turn:
                seq += 1
                data = event["data"]
                if "turn" in data:
                    data = dict(data, turn=copy)
                shown = data.get("tool_call_id")
                if isinstance(shown, str) and shown.startswith("tc-") and shown[3:].isdigit():
                    # the editor's id of a call is "tc-<seq of its tool/call>": it moves with the call
                    data = dict(data, tool_call_id=f"tc-{int(shown[3:]) + seq - event['seq']}")
                line = json.dumps(dict(event, seq=seq, data=data), ensure_ascii=False, separators=(",", ":"))
                if id_pattern is not None:
                    line = id_pattern.sub(lambda m: m.group(0)[:-1] + f'-{copy}"', line)
                for moved in moves:
                    line = line.replace(*moved)
                fh.write(line + "\n")
                written += len(line) + 1
                if events is not None and seq >= events and event["type"] == "turn/end":
                    break
            if events is None and size is None:
                break
    path.chmod(0o600)
    return session_id, path
