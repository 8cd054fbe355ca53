"""Crash recovery of a streamed answer from the stream journal (session/journal.py, agent/recovery.py).

Regression (newcomer finding F3): kill -9 of the server mid-answer lost the partial answer — a
SIGTERM logs it as an interrupted ``assistant`` event, a kill left nothing. A kill is imitated here
by copying the session folder (log and journal, as they are on disk) while the step streams; the
same session is then cancelled, as SIGTERM does, and both are compared.
"""

import asyncio
import shutil

import pytest
from support import stalling
from support.stalling import StallingEditor, stall, strict_endpoint  # noqa: F401 - the `endpoint` fixture
from support.timeouts import HANG

from agent_server.agent.recovery import close_open_turn
from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import EventLog, derive_messages
from agent_server.session.journal import StreamJournal, journal_path


def make_session(folder, endpoint, editor, max_attempts=1):
    return stalling.make_session(folder, endpoint, editor, context_window=100_000, reasoning_content="echo",
                                 max_attempts=max_attempts)


def killed_copy(session, to):
    """The session folder as a SIGKILL at this instant leaves it (the files; no process writes on)."""
    shutil.copytree(session.log.path.parent, to)
    return to / "events.jsonl"


def stripped(event):
    return event.type, event.data


async def test_kill_mid_answer_recovers_the_interrupted_assistant_event_a_sigterm_logs(tmp_path, endpoint):
    endpoint.push(text_stream("slow word 0. slow word 1. slow word 2. slow word 3.", chunk_size=5,
                              reasoning="Thinking first.", delay=0.01))
    endpoint.push(text_stream("after the kill"))
    editor = StallingEditor("agent_message_chunk", 4)
    session = make_session(tmp_path / "live", endpoint, editor)
    task = await stall(session, editor)
    killed = killed_copy(session, tmp_path / "killed")
    assert journal_path(killed).exists()
    session.cancel()  # what SIGTERM does
    assert (await asyncio.wait_for(task, HANG)).exit == "cancelled"
    cancelled = next(e for e in session.log.events if e.type == "assistant")
    assert cancelled.data["text"] == "slow word 0. slow wo" and cancelled.data["interrupted"]
    assert not journal_path(session.log.path).exists()  # logged: removed

    log = EventLog.open(killed)
    before = list(log.events)
    recovery = close_open_turn(log)
    assert stripped(recovery.streamed) == stripped(cancelled)  # the very event a cancel logs
    assert list(log.events)[: len(before)] == before and log.events[len(before)] is recovery.streamed
    assert recovery.notice.data["cut_off"] is True and recovery.notice.data["reply_lost"] is False
    assert not journal_path(killed).exists()
    # the next request holds it exactly as after the cancel: the prompt, then the answer so far
    projected = derive_messages(log.events)
    assert projected[:2] == derive_messages(session.log.events)[:2]
    assert projected[1] == {"role": "assistant", "content": cancelled.data["text"], "reasoning_content": "Thinking first."}
    assert not close_open_turn(log).changed  # a second load changes nothing
    log.close()


async def test_a_kill_before_any_text_streamed_recovers_as_before(tmp_path, endpoint):
    endpoint.push(tool_call_stream([("c1", "glob", '{"pattern": "*"}')]))
    endpoint.push(text_stream("ok"))
    editor = StallingEditor("tool_call")  # the calls' step streamed no text: nothing journaled
    session = make_session(tmp_path / "live", endpoint, editor)
    task = await stall(session, editor)
    killed = killed_copy(session, tmp_path / "killed")
    assert not journal_path(killed).exists()
    session.cancel()
    await asyncio.wait_for(task, HANG)
    log = EventLog.open(killed)
    recovery = close_open_turn(log)
    assert recovery.streamed is None and [e.data["call_id"] for e in recovery.results] == ["c1"]
    log.close()


async def test_a_failed_attempt_already_logged_is_not_logged_again(tmp_path, endpoint):
    endpoint.push({"kind": "sse", "frames": [
        {"choices": [{"index": 0, "delta": {"content": "broke "}}]},
        {"choices": [{"index": 0, "delta": {"content": "off"}}]}], "done": False})  # closes mid-answer
    endpoint.push(text_stream("second try, slowly", chunk_size=3, delay=0.01))
    editor = StallingEditor("agent_message_chunk", 4)  # "broke ", "off", the retry notice, then the second try's first chunk
    session = make_session(tmp_path / "live", endpoint, editor, max_attempts=2)
    task = await stall(session, editor)
    attempt = next(e for e in session.log.events if e.type == "assistant/attempt")
    assert attempt.data["text"] == "broke off"
    killed = killed_copy(session, tmp_path / "killed")
    session.cancel()
    await asyncio.wait_for(task, HANG)
    log = EventLog.open(killed)
    recovery = close_open_turn(log)
    assert recovery.streamed is not None and recovery.streamed.data["text"] == "sec"  # the second try only
    log.close()


def hand_made(tmp_path, events, journal=None, text="kept"):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    seqs = [log.append(kind, data).seq for kind, data in events]
    if journal is not None:
        writer = StreamJournal(journal_path(log.path))
        writer.begin(**journal(seqs))
        writer.text(text)
        writer._fd = None  # left behind as by a dead process: not removed
    return log


OPEN_STEP = [("turn/start", {"turn": 2}), ("user", {"turn": 2, "content": "hi"}), ("step/start", {"turn": 2, "step": 1})]


@pytest.mark.parametrize("why, events, journal", [
    ("an older step's (the open step streamed nothing yet)",
     OPEN_STEP[:2] + [("step/start", {"turn": 2, "step": 1}),
                      ("assistant", {"turn": 2, "step": 1, "text": "x", "tool_calls": []}),
                      ("step/start", {"turn": 2, "step": 2})],
     lambda s: {"step_seq": s[2], "turn": 2, "step": 1, "attempt": 1}),
    ("an older turn's", [("turn/start", {"turn": 1}), ("step/start", {"turn": 1, "step": 1}),
                         ("turn/end", {"turn": 1, "exit": "cancelled"}), *OPEN_STEP],
     lambda s: {"step_seq": s[1], "turn": 1, "step": 1, "attempt": 1}),
    ("another turn's, naming this step's seq", OPEN_STEP, lambda s: {"step_seq": s[2], "turn": 1, "step": 1, "attempt": 1}),
    ("its step's assistant event is logged (killed before the journal was removed)",
     OPEN_STEP + [("assistant", {"turn": 2, "step": 1, "text": "kept", "tool_calls": []})],
     lambda s: {"step_seq": s[2], "turn": 2, "step": 1, "attempt": 1}),
    ("its attempt is logged as a failed attempt",
     OPEN_STEP + [("assistant/attempt", {"turn": 2, "step": 1, "attempt": 1, "text": "kept", "error": {}})],
     lambda s: {"step_seq": s[2], "turn": 2, "step": 1, "attempt": 1}),
])
def test_a_journal_that_is_not_the_open_steps_is_not_used_and_is_removed(tmp_path, why, events, journal):
    log = hand_made(tmp_path, events, journal)
    recovery = close_open_turn(log)
    assert recovery.turn == 2 and recovery.streamed is None, why
    assert not any(e.type == "assistant" for e in log.events[len(events) + 1:]), why
    assert not journal_path(log.path).exists(), why


def test_a_journal_beside_a_log_with_nothing_open_leaves_the_log_untouched_and_is_removed(tmp_path):
    log = hand_made(tmp_path, [*OPEN_STEP, ("turn/end", {"turn": 2, "exit": "cancelled"})],
                    lambda s: {"step_seq": s[2], "turn": 2, "step": 1, "attempt": 1})
    size = log.path.stat().st_size
    assert not close_open_turn(log).changed and log.path.stat().st_size == size
    assert not journal_path(log.path).exists()


def test_the_open_steps_journal_is_logged_before_the_notice_and_the_turn_end(tmp_path):
    log = hand_made(tmp_path, OPEN_STEP, lambda s: {"step_seq": s[2], "turn": 2, "step": 1, "attempt": 1},
                    text="half an answer")
    close_open_turn(log)
    assert [e.type for e in log.events[-3:]] == ["assistant", "notice", "turn/end"]
    assert log.events[-3].data == {"turn": 2, "step": 1, "text": "half an answer", "reasoning": "", "tool_calls": [],
                                   "finish_reason": None, "usage": None, "interrupted": True}


def test_a_log_written_before_the_journal_recovers_and_projects_as_it_did(tmp_path):
    log = hand_made(tmp_path, OPEN_STEP)
    before = log.path.read_bytes()
    recovery = close_open_turn(log)
    assert recovery.streamed is None and recovery.notice.data["reply_lost"] is True
    assert log.path.read_bytes().startswith(before)
    assert [e.type for e in log.events[-2:]] == ["notice", "turn/end"]


async def test_a_cancel_while_the_finished_answer_is_flushed_to_the_editor_keeps_its_text(tmp_path, endpoint):
    """The rest of F3's class: a cancel (SIGTERM) after the stream ended but before its ``assistant``
    event was committed — while the editor was sent the last held-back text — logged nothing of an
    answer the user had been shown whole (and a kill there left the journal, which a cancel then
    removed). It is kept as the interrupted answer, as a cancel a moment earlier keeps it."""
    endpoint.push(tool_call_stream([("c1", "glob", '{"pattern": "*"}')], text="Let me look."))
    endpoint.push(text_stream("ok"))
    editor = StallingEditor()
    flushing = asyncio.Event()

    async def flush():
        flushing.set()
        await asyncio.Event().wait()

    session = make_session(tmp_path / "live", endpoint, editor)
    session._flush = flush
    task = asyncio.ensure_future(session.prompt([{"type": "text", "text": "go"}]))
    await asyncio.wait_for(flushing.wait(), HANG)
    killed = killed_copy(session, tmp_path / "killed")
    session.cancel()
    assert (await asyncio.wait_for(task, HANG)).exit == "cancelled"
    kept = [e for e in session.log.events if e.type == "assistant"]
    assert [(e.data["text"], e.data["tool_calls"], e.data.get("interrupted")) for e in kept] == [
        ("Let me look.", [], True)]  # its call never ran: it is not kept (as for a cancel mid-stream)
    assert not any(e.type == "tool/call" for e in session.log.events)
    log = EventLog.open(killed)
    assert stripped(close_open_turn(log).streamed) == stripped(kept[0])  # a kill there: the same event
    log.close()


async def test_an_answer_whose_event_could_not_be_logged_is_kept_once_the_log_takes_writes(tmp_path, endpoint):
    """A failed append (disk full) of the streamed answer's ``assistant`` event stops the turn
    (``STORAGE``); once the log takes writes, the next prompt closes that turn as after a crash —
    with the text the user was shown, from the journal."""
    endpoint.push(text_stream("shown to the user", chunk_size=4))
    endpoint.push(text_stream("next"))
    editor = StallingEditor()
    session = make_session(tmp_path / "live", endpoint, editor)
    write = session.log._write

    def full(line):
        if b'"type":"assistant"' in line:
            raise OSError(28, "No space left on device")
        write(line)

    session.log._write = full
    outcome = await session.prompt([{"type": "text", "text": "go"}])
    assert outcome.exit == "error" and outcome.error["code"] == "STORAGE"
    assert journal_path(session.log.path).exists()
    session.log._write = write
    assert (await session.prompt([{"type": "text", "text": "again"}])).exit == "end_turn"
    kept = [e for e in session.log.events if e.type == "assistant"][0]
    assert (kept.data["text"], kept.data["interrupted"]) == ("shown to the user", True)
    ends = [e.data for e in session.log.events if e.type == "turn/end"]
    assert ends[0] == {"turn": 1, "exit": "interrupted", "cause": "log_write_failed"}
    assert not journal_path(session.log.path).exists()
