"""Scripted responses of the offline endpoint: validation, loading, and builders.

Role: define the data format of a scripted answer (plain JSON-able dicts, so a script can live in
a file and travel over a CLI), check it early, and build common answers (a streamed text answer,
a streamed tool-call answer) in the exact shape OpenAI-compatible providers send.

Must never: touch the network or the clock — this module is data only.

Kinds (``"kind"`` field):

* ``sse_file`` — ``{"path": str, "chunk_delay": s}``: serve a recorded SSE body byte for byte
  (one TCP write, or one per frame with ``chunk_delay`` > 0). Relative paths are resolved
  against the script file's folder.
* ``sse`` — ``{"frames": [obj | str], "delay": s, "done": true}``: each frame ``data: <json>``
  plus a blank line, ``data: [DONE]`` at the end unless ``done`` is false.
* ``raw`` — ``{"status": 200, "headers": {}, "writes": [{"text" | "bytes_b64": …, "delay": s}],
  "framing": "chunked" | "close", "close": true, "abort": false}``: arbitrary body bytes, one
  TCP write each. ``close: false`` keeps the connection open (silent) after the writes;
  ``abort: true`` (chunked) closes without the final zero-length chunk — a broken body.
* ``error`` — ``{"status": 429, "headers": {}, "json": {...} | "text": str}``: a complete
  non-streamed answer (any status, also 200 for non-SSE answers).
* ``hang`` — ``{"headers": true}``: send the SSE response headers (or nothing if false), then
  nothing, until the client goes away.

Every kind also takes ``"latency": s`` (default 0): seconds between reading the request and
sending the first byte of the answer — a provider's time to first byte, as the benchmark plays it.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._streams import text_stream, tool_call_stream

__all__ = ["DEMO_SCRIPT", "KINDS", "Script", "load_script", "normalize_response", "step_of",
           "text_stream", "tool_call_stream"]

KINDS = frozenset({"sse_file", "sse", "raw", "error", "hang"})
#: The bundled demo script (the answer to "Say hello and tell me what you are.").
DEMO_SCRIPT = Path(__file__).resolve().parent / "scripts" / "demo.json"

NO_SCRIPT_LEFT: dict[str, Any] = {
    "kind": "error", "status": 500,
    "json": {"error": {"message": "offline endpoint: no scripted response left",
                       "type": "offline_script_exhausted", "code": "offline_script_exhausted"}},
}


def _fail(why: str, response: Any) -> None:
    shown = json.dumps(response, default=str)[:300]
    raise ValueError(f"invalid scripted response ({why}): {shown}")


def normalize_response(response: Mapping[str, Any], *, base_dir: str | Path | None = None
                       ) -> dict[str, Any]:
    """Validate one scripted response and return a copy with defaults filled in and an
    ``sse_file`` path made absolute (relative to ``base_dir``, else the current folder).

    Raises:
        ValueError: unknown kind, missing/ill-typed field, or an ``sse_file`` that does not
            exist.
    """
    if not isinstance(response, Mapping):
        _fail("not an object", response)
    out = copy.deepcopy(dict(response))
    kind = out.get("kind")
    if kind not in KINDS:
        _fail(f"kind must be one of {sorted(KINDS)}", response)
    if kind == "sse_file":
        if not isinstance(out.get("path"), str):
            _fail("sse_file needs a 'path'", response)
        path = Path(out["path"])
        if not path.is_absolute():
            path = Path(base_dir or ".") / path
        if not path.is_file():
            _fail(f"no such file {path}", response)
        out["path"] = str(path.resolve())
        out.setdefault("chunk_delay", 0.0)
    elif kind == "sse":
        if not isinstance(out.get("frames"), list):
            _fail("sse needs a 'frames' list", response)
        out.setdefault("delay", 0.0)
        out.setdefault("done", True)
    elif kind == "raw":
        out.setdefault("status", 200)
        out.setdefault("headers", {})
        out.setdefault("framing", "chunked")
        out.setdefault("close", True)
        out.setdefault("abort", False)
        if out["framing"] not in ("chunked", "close"):
            _fail("framing must be 'chunked' or 'close'", response)
        writes = out.get("writes")
        if not isinstance(writes, list) or not all(
                isinstance(w, Mapping) and (("text" in w) != ("bytes_b64" in w)) for w in writes):
            _fail("raw needs 'writes': [{'text'|'bytes_b64': ..., 'delay': s}]", response)
    elif kind == "error":
        if not isinstance(out.get("status"), int):
            _fail("error needs an integer 'status'", response)
        out.setdefault("headers", {})
        if "json" not in out and "text" not in out:
            _fail("error needs 'json' or 'text'", response)
    elif kind == "hang":
        out.setdefault("headers", True)
    latency = out.setdefault("latency", 0.0)
    if not isinstance(latency, (int, float)) or isinstance(latency, bool) or not 0 <= latency < math.inf:
        _fail("latency must be a number of seconds >= 0", response)
    return out


class Script:
    """A loaded script: ``responses`` in order, an optional ``default`` for when they run out,
    and ``loop`` (replay the responses forever instead of using the default). ``by_step``: answer
    each request with ``responses[k]``, ``k`` being the number of assistant messages since the
    request's last user prompt (its step within the turn; the last response repeats) — a script
    that serves any number of runs, independent of what came before."""

    def __init__(self, responses: Iterable[Mapping[str, Any]] = (), *,
                 default: Mapping[str, Any] | None = None, loop: bool = False,
                 base_dir: str | Path | None = None, by_step: bool = False) -> None:
        self.responses = [normalize_response(r, base_dir=base_dir) for r in responses]
        self.default = normalize_response(default or NO_SCRIPT_LEFT, base_dir=base_dir)
        self.loop = loop
        self.by_step = by_step


def step_of(body: bytes) -> int | None:
    """The step within the turn of a chat request ``body``: assistant messages after the last
    user message that is not an ``[agent-server …]`` notice; ``None`` for a body without messages."""
    try:
        messages = json.loads(body)["messages"]
        roles = [(m.get("role"), str(m.get("content") or "")) for m in messages]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    last_user = max((i for i, (role, text) in enumerate(roles)
                     if role == "user" and not text.startswith("[agent-server")), default=-1)
    return sum(1 for role, _ in roles[last_user + 1:] if role == "assistant")


def load_script(source: str | Path) -> Script:
    """Load a script file: a JSON list of responses, or an object
    ``{"responses": [...], "default": {...}?, "loop": bool?, "by_step": bool?}`` (other keys, e.g.
    ``"description"``, are ignored). ``"demo"`` names the bundled :data:`DEMO_SCRIPT`;
    ``"demo-task"`` the demo's task (``demo_task.demo_task_script``), answered per step.

    Raises:
        OSError: the file cannot be read. ValueError: bad JSON or a bad response.
    """
    if str(source) == "demo-task":  # the demo's small real task (fix a bug), served per step
        from .demo_task import demo_task_script

        return Script(demo_task_script(), by_step=True)
    path = DEMO_SCRIPT if str(source) == "demo" else Path(source)
    data = json.loads(path.read_text(encoding="utf-8"))
    base_dir = path.resolve().parent
    if isinstance(data, list):
        return Script(data, base_dir=base_dir)
    if not isinstance(data, Mapping) or not isinstance(data.get("responses", []), list):
        raise ValueError(f"{path}: a script is a list of responses or {{'responses': [...]}}")
    return Script(data.get("responses", []), default=data.get("default"),
                  loop=bool(data.get("loop", False)), base_dir=base_dir, by_step=bool(data.get("by_step", False)))
