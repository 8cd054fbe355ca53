"""One network read of a server-sent event stream in, the assembler's events of it out.

Role: ``SseReads`` feeds the text of each read (``httpx.Response.aiter_text``) to ``httpx-sse``'s
own line and event decoders — the parser behind ``EventSource.aiter_sse``; a one-line ``data:``
event is taken as the decoder would return it without calling it (``_DATA_EVENT``) — and each
event's data to the assembler (through ``FrameDecoder``, which decodes a repeated frame shape without a full
JSON parse). What one read carried is handled in one go and comes out as one list of events, the
adjacent deltas of one kind joined (``"H"``, ``"e"``, ``"y"`` → ``"Hey"``): a read of 700 frames
is one text delta for the layers above, not 700. Nothing waits for more bytes than the read
brought, so the first delta of a stream leaves as soon as it is read.

Must never: reorder or drop a byte of output, read past ``[DONE]``, or hide an error frame (an
error stops the read: the events before it come first, then the error).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.decoder import scanstring

from httpx_sse._decoders import SSEDecoder, SSELineDecoder  # pinned: httpx-sse>=0.4.1,<0.5

from ._assembler import StreamAssembler
from ._errors import LLMError, error_from_payload
from ._events import ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from ._frames import REASONING, TEXT, FrameDecoder

__all__ = ["SseReads"]


class SseReads:
    """The events of one stream, a network read at a time.

    ``assembler``: the stream's ``StreamAssembler``; ``max_output_chars``: the output cap (``None``:
    none); ``status``: the response's HTTP status, for error messages. ``done`` turns true when
    ``data: [DONE]`` was read.
    """

    def __init__(self, assembler: StreamAssembler, *, max_output_chars: int | None, status: int) -> None:
        self.assembler = assembler
        self.max_output_chars = max_output_chars
        self.status = status
        self.done = False
        self._lines = SSELineDecoder()
        self._events = SSEDecoder()
        self._frames = FrameDecoder()
        self._rest: tuple[list[str], int] | None = None  # the lines of the last read, where to go on
        self._clean = True  # the event decoder holds nothing of an event (no line since a blank one)
        self._shown = False

    @property
    def pending(self) -> bool:
        """Whether the last read has lines left: the stream's first delta is returned as soon as
        it is decoded (never after the rest of its read); ``more()`` gives the rest."""
        return self._rest is not None

    def read(self, text: str) -> tuple[list[StreamEvent], LLMError | None]:
        """The events of one read's ``text``, and the error that stopped it (``None``: none)."""
        return self._handle(self._lines.decode(text), 0)

    def more(self) -> tuple[list[StreamEvent], LLMError | None]:
        """The events of the rest of the last read (see ``pending``)."""
        rest, self._rest = self._rest, None
        return self._handle(*rest) if rest is not None else ([], None)

    def end(self) -> tuple[list[StreamEvent], LLMError | None]:
        """The events of a last line the stream did not end with a newline (as ``aiter_sse``)."""
        return self._handle(self._lines.flush(), 0)

    def _handle(self, lines: list[str], i: int) -> tuple[list[StreamEvent], LLMError | None]:
        """The events of ``lines[i:]`` (lines of ``SSELineDecoder``)."""
        out: list[StreamEvent] = []
        run: list[str] = []          # the pieces of the delta being joined
        run_key: tuple[type, int] | None = None
        assembler, frames, decode = self.assembler, self._frames, self._events.decode
        error: LLMError | None = None
        unfed: dict[str, list[str]] = {TEXT: [], REASONING: []}  # fast-path text not given to the assembler yet

        def feed_unfed() -> None:  # before the assembler sees a full frame, and at the end
            for field, pieces in unfed.items():
                if pieces:
                    assembler.add_delta(field, "".join(pieces))
                    pieces.clear()

        def close_run() -> None:
            if run_key is not None and run:
                text = run[0] if len(run) == 1 else "".join(run)
                kind, index = run_key
                out.append(ToolCallDelta(index, text) if kind is ToolCallDelta else kind(text))
                run.clear()

        line_before, after, shape_field, start, tail = _line_shape(frames)
        shape_key = _TEXT_KEY if shape_field is TEXT else _REASONING_KEY
        shape_unfed = unfed[shape_field]
        first = not self._shown  # the stream's first delta leaves without waiting for the rest of its read
        count = len(lines)
        clean = self._clean
        while i < count:
            line = lines[i]
            i += 1
            if clean and i < count and not lines[i] and line.startswith("data: "):
                # a one-line data event: what the decoder would return for these two lines (see
                # _DATA_EVENT), without its two calls; it is left in the same (clean) state
                i += 1
                if line.startswith(line_before) and line.endswith(after):
                    # the shape in use (frames.decode's test, inline on the line: a call and a copy less;
                    # the literal ending where ``after`` starts also means the two do not overlap)
                    try:
                        text, stop = scanstring(line, start)
                    except ValueError:
                        stop = -1
                    if stop == len(line) - tail:
                        if text:
                            if shape_key is not run_key:
                                close_run()
                                run_key = shape_key
                            run.append(text)
                            shape_unfed.append(text)
                            if first:
                                self._rest = (lines, i)
                                break
                        continue
                data, event = line[6:], ""
            else:
                sse = decode(line)
                clean = not line  # a blank line dispatches or drops what was pending
                if sse is None:
                    continue
                data, event = sse.data, sse.event
            fast = frames.decode(data) if event != "error" else None
            if fast is not None:
                field, text = fast
                if text:
                    key = _TEXT_KEY if field is TEXT else _REASONING_KEY
                    if key is not run_key:
                        close_run()
                        run_key = key
                    run.append(text)
                    unfed[field].append(text)
                    if first:
                        self._rest = (lines, i)
                        break
            else:
                stripped = data.strip()
                if stripped == "[DONE]":
                    self.done = True  # nothing after it is read
                    break
                if not stripped:
                    continue  # an event without data (e.g. "event: ping")
                try:
                    chunk = json.loads(data)
                except ValueError:
                    error = LLMError("SERVER", f"malformed stream frame: {data[:200]!r}", status=self.status)
                    break
                if event == "error" and isinstance(chunk, Mapping):
                    error = error_from_payload(chunk, default="SERVER")
                    break
                feed_unfed()
                try:
                    events = assembler.feed(chunk)
                except LLMError as exc:
                    error = exc
                    break
                if frames.learn(data, chunk):
                    line_before, after, shape_field, start, tail = _line_shape(frames)
                    shape_key = _TEXT_KEY if shape_field is TEXT else _REASONING_KEY
                    shape_unfed = unfed[shape_field]
                for item in events:
                    kind = type(item)
                    key = (_TEXT_KEY if kind is TextDelta else _REASONING_KEY if kind is ReasoningDelta
                           else (kind, item.index) if kind is ToolCallDelta else None)  # type: ignore[union-attr]
                    if key is None or key != run_key:
                        close_run()
                        run_key = key
                    if key is None:
                        out.append(item)
                    else:
                        run.append(item.arguments if kind is ToolCallDelta else item.text)  # type: ignore[union-attr]
            if first and (run or out):
                self._rest = (lines, i)
                break
        self._clean = clean
        close_run()
        feed_unfed()
        if out:
            self._shown = True
        cap = self.max_output_chars
        if error is None and cap is not None and assembler.output_chars > cap:  # a read is ≤ 64 KiB
            error = LLMError("NETWORK", f"the model's output passed {cap:,} characters in one request "
                             "(max_output_chars): stopped")
        return out, error


_DATA_EVENT = """A blank line after ``data: <value>`` when the decoder holds nothing (no line since the last
blank one): ``SSEDecoder.decode`` appends ``<value>`` to the event's data on the first line and
returns ``ServerSentEvent(event="", data="<value>", id=<last id>, retry=None)`` on the second,
leaving itself as it was — so ``_handle`` takes ``<value>`` and an empty event type for such a
pair without the two calls (most of a fast stream's reading time). Every other line, and a pair
split over two reads, goes through ``SSEDecoder``; the event id is unused here."""

_NO_SHAPE = ("data: \n", "", TEXT, 0, 0)  # the prefix of no line (SSELineDecoder splits at every "\n")


def _line_shape(frames: FrameDecoder) -> tuple[str, str, str, int, int]:
    """The shape in use, for a whole ``data: `` line: ``(line prefix up to and with the opening
    quote of the string literal, suffix after it, field, where the literal's text starts, len(suffix))``
    (``_NO_SHAPE`` when none is learned)."""
    if not frames.shapes:
        return _NO_SHAPE
    before, after, field, start, _ = frames.shapes[0]
    return "data: " + before + '"', after, field, len(before) + 7, len(after)


_TEXT_KEY = (TextDelta, 0)
_REASONING_KEY = (ReasoningDelta, 0)
