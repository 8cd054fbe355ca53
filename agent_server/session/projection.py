"""The projection: session events → the chat messages a model request carries.

Role: ``derive_messages(events)`` turns the log into OpenAI-style ``messages`` (without the system
message, which comes from ``request/header``). It is called before every model request and its
result is thrown away afterwards: history is a view of the log, never a second list.

Must never: keep state between calls, sort, or invent content that is not in an event.

Rules (DESIGN.md §3):
* ``user`` → ``{"role": "user", "content": data.content}``; with images (``blocks`` of type
  ``image`` naming a ``sha256``: stored in the session folder, ``session.images``) the content is a
  list of parts, the text first (when there is any), then an OpenAI ``image_url`` part per image
  holding a reference that ``ImageStore.resolve`` turns into its ``data:`` URL on the way out;
* ``assistant`` with no text and no tool calls → nothing (invariant 10);
* ``assistant`` → one assistant message with its ``tool_calls`` (arguments byte-exact as streamed)
  and, when the model sent reasoning, ``reasoning_content`` (the request builder decides whether
  the provider gets it back);
* ``tool/result`` → ``{"role": "tool", "tool_call_id": data.call_id, "content": data.content}``,
  placed right after its call's assistant message (and that message's earlier results): in a log
  written whole that is where it already is; a result appended later by recovery (a log whose
  ``tool/result`` was lost to a failed append before its turn was closed, and which later turns
  followed) is moved up to its call, so no request carries a call without its result;
* ``notice`` (something the agent itself must tell the model, e.g. the step budget ran out) →
  a user message ``"[agent-server notice] " + data.text``;
* ``header/note`` (what changed since the system message was written — the mode, the shell's
  sandbox, the ``AGENTS.md`` instructions, the model —, logged right before the request that first
  carries it) → the same kind of user message; the older events the system text was rendered from
  (``mode/changed``, ``project/instructions``, ``sandbox/status``) are never projected, so logs
  written before notes existed rebuild their requests as they were;
* a turn whose ``turn/end.exit`` is ``refusal`` is left out from its user message on (ACP's rule).

Interrupted turns (``agent/recovery.py`` writes the events; nothing special happens here):
* an ``assistant`` event with ``interrupted: true`` (text streamed before a cancel) projects like
  any other — its text, never a tool call (half-streamed calls are dropped), nothing if empty;
* every call of the last assistant message that got no real result has a synthetic
  ``tool/result`` (``reason: "aborted"`` — ``ABORTED_BEFORE_DISPATCH``, it never ran — or
  ``"interrupted"`` — it may have run), so no request ever carries a call without a result;
* one ``notice`` with ``reason: "cancelled"`` (cancel in this process) or ``"interrupted"`` (the
  process died; written on load, followed by ``turn/end {exit: "interrupted"}``) closes the turn:
  the model reads, as the last user message before the next prompt, that the turn was cut short,
  whether its reply was cut off or lost, and which calls did not run or may have half-run;
* ``inbox/*`` events (prompts that waited for a turn, including ones dropped by a crash) are not
  projected: the model sees a prompt only through the ``user`` event of the turn that ran it.

Compaction (``agent/compaction.py`` writes the events): a ``compaction/end`` event with
``{first_seq, last_seq, message}`` is a replacement — the surface messages of the events in
``[first_seq, last_seq]`` (an earlier checkpoint included) become ONE user message, ``message``
(the checkpoint), at the place of the first of them. The replaced events stay in the log; a
``compaction/end`` without ``message`` (an aborted compaction) replaces nothing.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from agent_server.session.events import LogCorruptError, SessionEvent
from agent_server.session.images import image_ref


class EventShapeError(LogCorruptError):
    """An event the projection reads lacks a field its type needs, or has one of the wrong type
    (a line that is valid JSON and a valid envelope, with the wrong ``data``: e.g. a
    ``tool/result`` without ``call_id``). ``line`` is the event's ``seq`` — its line in the log,
    which numbers its lines 1, 2, 3 … — and ``path`` is ``None``: the projection reads events, not
    files; ``EventLog.open`` raises it again as a plain ``LogCorruptError`` with the log's path."""

    def __init__(self, event: SessionEvent, reason: str) -> None:
        super().__init__(None, event.seq, f"{event.type} event: {reason}")  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def derive_messages(events: Iterable[SessionEvent]) -> list[dict[str, Any]]:
    """Project ``events`` (oldest first) into chat messages, in log order.

    Returns a new list of new dicts on every call. Events of unknown types are ignored, so newer
    bookkeeping events never change what an older request looked like.
    """
    return [message for _, message in surface_messages(events)]


def surface_messages(events: Iterable[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
    """Like ``derive_messages`` but each message paired with the ``seq`` of the event it came from
    (a checkpoint: the ``first_seq`` of the range it replaces), compactions applied in log order."""
    events = list(events)
    pairs = _plain_messages(events)
    for event in events:
        if event.type == "compaction/end" and isinstance(event.data.get("message"), str):
            first, last = event.data["first_seq"], event.data["last_seq"]
            pairs = ([p for p in pairs if p[0] < first]
                     + [(first, {"role": "user", "content": event.data["message"]})]
                     + [p for p in pairs if p[0] > last])
    return pairs


def _plain_messages(events: list[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
    return _build_plain(events).pairs


def _build_plain(events: list[SessionEvent]) -> "_Plain":
    refused = {
        e.data.get("turn")
        for e in events
        if e.type == "turn/end" and e.data.get("exit") == "refusal"
    }
    plain = _Plain()
    turn: int | None = None
    for event in events:
        if event.type == "turn/start":
            turn = event.data.get("turn")
            continue
        if turn in refused and turn is not None:
            if event.type == "turn/end":
                turn = None  # what comes after a refused turn's end (recovery's results) is projected
            continue
        plain.add(event)
    return plain


class _Plain:
    """Plain messages (``(seq, message)``) in projection order, built one event at a time: a tool
    result goes right after its call's assistant message (see the module docstring)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[int, dict[str, Any]]] = []
        self.changes = 0  # messages added so far (the list changed that many times)
        self.kept = 0  # how many pairs at the start are as they were when ``kept`` was last reset
        self._group_end = 0  # where the next result of the latest assistant message with calls goes
        self._group_calls: set[str] = set()  # its calls that have no result yet

    def add(self, event: SessionEvent) -> None:
        message = _message_of(event)
        if message is None:
            return
        pair = (event.seq, message)
        self.changes += 1
        if message["role"] == "tool" and message["tool_call_id"] in self._group_calls:
            self._group_calls.discard(message["tool_call_id"])
            self.kept = min(self.kept, self._group_end)
            self.pairs.insert(self._group_end, pair)
            self._group_end += 1
            return
        self.kept = min(self.kept, len(self.pairs))
        self.pairs.append(pair)
        if message["role"] == "assistant" and message.get("tool_calls"):
            self._group_calls = {c["id"] for c in message["tool_calls"]}
            self._group_end = len(self.pairs)


def _assistant_message(data: dict[str, Any]) -> dict[str, Any] | None:
    text = data.get("text") or ""
    calls = data.get("tool_calls") or []
    if not text and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    reasoning = data.get("reasoning") or ""
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in calls
        ]
    return message


class ProjectionMemo:
    """A memo of ``surface_messages`` over an append-only log, for long sessions.

    ``surface(events)`` equals ``surface_messages(events)`` for every ``events``: it only caches
    that pure function. The plain messages of the prefix already seen are kept and only new events
    are projected; compactions are applied on top (their result kept until the next message). It
    starts again from scratch when the view is rewritten: a list that does not extend the last one
    (tail repair, fork, a reloaded log, a shorter list) or a ``turn/end`` with ``exit: "refusal"``
    (it drops its whole turn). ``generation`` counts those new starts.
    """

    def __init__(self) -> None:
        self.generation = 0
        """Incremented each time the memo starts again (its message dicts are then new ones)."""
        self._start()

    def _start(self) -> None:
        self._seen: tuple[SessionEvent | None, SessionEvent | None, int] = (None, None, 0)  # first, last, count
        self._plain = _Plain()
        self._compactions: list[tuple[int, int, dict[str, Any]]] = []  # (first_seq, last_seq, checkpoint)
        self._applied: list[tuple[int, dict[str, Any]]] = []  # the plain pairs with the compactions applied
        self._applied_for = (0, 0)  # (plain pairs, compactions) that _applied was made from
        self.kept = 0
        """How many pairs at the start of the list ``shared`` returned last are the same (objects,
        in place) as in the list it returned the time before (0 after a new start)."""
        self.generation += 1

    def _extends(self, events: Sequence[SessionEvent]) -> bool:
        first, last, n = self._seen
        return n == 0 or (len(events) >= n and events[0] is first and events[n - 1] is last)

    def surface(self, events: Iterable[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
        """``surface_messages(events)``, computed incrementally when ``events`` extends the list
        this memo saw last. Returned messages are new dicts (callers may change them)."""
        return [(seq, dict(message)) for seq, message in self.shared(events)]

    def shared(self, events: Iterable[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
        """``surface(events)`` without the copies: the list and its dicts belong to the memo and
        must not be changed. A message dict stays the same object (same ``id``) for as long as
        ``generation`` does not change, and ``kept`` says how much of the list is unchanged since
        the previous call, so callers may cache what they derive from it."""
        if not isinstance(events, Sequence):  # a log's events (``Prefix``), a list or a tuple: as they are
            events = list(events)
        generation = self.generation
        if not self._extends(events):
            self._start()
        new = events[self._seen[2]:]
        plain = self._plain
        before = (len(plain.pairs), len(self._compactions))
        plain.kept = before[0]
        if any(e.type == "turn/end" and e.data.get("exit") == "refusal" for e in new):
            self._start()
            plain = self._plain = _build_plain(events)
            new = [e for e in events if e.type == "compaction/end"]
        else:
            add = plain.add
            for event in new:
                if event.type in _PROJECTED:  # (the others project to nothing: not even looked at)
                    add(event)
        self._compactions += [(e.data["first_seq"], e.data["last_seq"], {"role": "user", "content": e.data["message"]})
                              for e in new if e.type == "compaction/end" and isinstance(e.data.get("message"), str)]
        self._seen = (events[0], events[-1], len(events)) if events else (None, None, 0)
        if self.generation != generation:
            self.kept = 0
        if not self._compactions:
            if self.generation == generation:
                self.kept = plain.kept
            return plain.pairs
        self.kept = min(self.kept, len(self._applied)) if self.generation == generation else 0
        if (len(plain.pairs), len(self._compactions)) == self._applied_for:
            self.kept = len(self._applied)
            return self._applied
        reach = max(last for _, last, _ in self._compactions)
        added = plain.pairs[before[0]:]
        if (self.generation == generation and self._applied_for == before == (before[0], len(self._compactions))
                and plain.kept == before[0] and all(seq > reach for seq, _ in added)):
            # no new compaction, only messages appended after every replaced range
            self.kept = len(self._applied)
            self._applied = self._applied + added
        else:
            pairs = plain.pairs
            for first, last, checkpoint in self._compactions:
                pairs = [p for p in pairs if p[0] < first] + [(first, checkpoint)] + [p for p in pairs if p[0] > last]
            self._applied = pairs
            self.kept = 0
        self._applied_for = (len(plain.pairs), len(self._compactions))
        return self._applied


_PROJECTED = frozenset({"user", "assistant", "tool/result", "tool/call", "notice", "header/note", "compaction/end"})
"""The event types ``_message_of`` looks at (a message, or a shape it checks); every other one projects to nothing."""


def _message_of(event: SessionEvent) -> dict[str, Any] | None:
    """The message one event projects to on its own (refusals and compactions aside). Raises
    ``EventShapeError`` for an event of a projected type (or a ``tool/call``, which recovery
    matches by ``call_id``) whose ``data`` lacks a field or has one of the wrong type."""
    kind, data = event.type, event.data
    if kind == "user":
        content = data.get("content")
        if type(content) is not str:
            raise EventShapeError(event, _why("content", content, "a string"))
        images = [b for b in data.get("blocks") or () if isinstance(b, dict) and b.get("type") == "image"
                  and isinstance(b.get("sha256"), str)]
        if images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
            return {"role": "user", "content": parts + [image_ref(str(b.get("mimeType")), b["sha256"]) for b in images]}
        return {"role": "user", "content": content}
    if kind == "assistant":
        try:
            return _assistant_message(data)
        except (KeyError, TypeError, AttributeError):
            raise EventShapeError(event, "tool_calls must be a list of {id, name, arguments} objects "
                                         "with string values") from None
    if kind == "tool/result":
        call_id, content = data.get("call_id"), data.get("content")
        if type(call_id) is not str:
            raise EventShapeError(event, _why("call_id", call_id, "a string"))
        if type(content) is not str:
            raise EventShapeError(event, _why("content", content, "a string"))
        return {"role": "tool", "tool_call_id": call_id, "content": content}
    if kind == "tool/call":
        if type(data.get("call_id")) is not str:
            raise EventShapeError(event, _why("call_id", data.get("call_id"), "a string"))
        return None
    if kind == "notice" or kind == "header/note":
        text = data.get("text")
        if type(text) is not str:
            raise EventShapeError(event, _why("text", text, "a string"))
        return {"role": "user", "content": f"[agent-server notice] {text}"}
    if kind == "compaction/end" and isinstance(data.get("message"), str):
        if type(data.get("first_seq")) is not int or type(data.get("last_seq")) is not int:
            raise EventShapeError(event, "first_seq and last_seq must be integers")
    return None


def _why(field: str, value: Any, wanted: str) -> str:
    """``"no call_id"`` or ``"call_id is a int, not a string"``: what is wrong with one field."""
    return f"no {field}" if value is None else f"{field} is {type(value).__name__}, not {wanted}"
