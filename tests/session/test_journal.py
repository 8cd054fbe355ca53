"""The stream journal (session/journal.py): what its writer leaves on disk and what its reader takes."""

import os

from agent_server.session.journal import StreamJournal, journal_path, read_journal


def started(tmp_path, **kw):
    journal = StreamJournal(journal_path(tmp_path / "events.jsonl"))
    journal.begin(**{"step_seq": 7, "turn": 2, "step": 3, "attempt": 1, **kw})
    return journal


def test_deltas_are_read_back_text_and_reasoning_apart_in_the_order_written(tmp_path):
    journal = started(tmp_path)
    for kind, delta in [("reasoning", "Let me "), ("reasoning", "think."), ("text", "Hé "), ("text", "\U0001f600\n"),
                        ("text", "\ud800 {\"t\":1}")]:
        getattr(journal, kind)(delta)
    got = read_journal(journal.path)
    assert (got.step_seq, got.turn, got.step, got.attempt) == (7, 2, 3, 1)
    assert got.text == "Hé \U0001f600\n\ud800 {\"t\":1}" and got.reasoning == "Let me think."
    assert journal.path.read_bytes().isascii()  # a torn write can never end inside a UTF-8 sequence of ours
    assert oct(journal.path.stat().st_mode & 0o777) == "0o600"


def test_an_attempt_that_streams_nothing_writes_no_file(tmp_path):
    journal = started(tmp_path)
    assert not journal.path.exists()
    journal.end()
    assert not journal.path.exists()


def test_end_removes_the_journal_and_a_new_attempt_starts_from_nothing(tmp_path):
    journal = started(tmp_path)
    journal.text("first attempt")
    journal.begin(step_seq=7, turn=2, step=3, attempt=2)
    assert not journal.path.exists()
    journal.text("second")
    got = read_journal(journal.path)
    assert (got.attempt, got.text) == (2, "second")
    journal.end()
    assert not journal.path.exists()
    journal.text("after the end")  # not journaling any more: nothing is written
    assert not journal.path.exists()


def test_a_torn_last_write_is_dropped_whole_and_the_deltas_before_it_are_kept(tmp_path):
    journal = started(tmp_path)
    journal.text("kept ")
    journal.text("caf\u00e9")
    whole = journal.path.read_bytes()
    journal.text("lost \u00e9")
    torn = journal.path.read_bytes()
    for cut in range(len(whole), len(torn)):  # the kill came inside the last write, at every byte
        journal.path.write_bytes(torn[:cut])
        assert read_journal(journal.path).text == "kept caf\u00e9", cut
    journal.path.write_bytes(whole + b'{"t":"caf\xc3')  # raw bytes of a half UTF-8 character, unterminated
    assert read_journal(journal.path).text == "kept caf\u00e9"


def test_an_unreadable_line_ends_the_journal_there_and_a_bad_header_makes_it_unusable(tmp_path):
    journal = started(tmp_path)
    journal.text("one ")
    good = journal.path.read_bytes()
    journal.path.write_bytes(good + b'{"x":"?"}\n{"t":"two"}\n')
    assert read_journal(journal.path).text == "one "
    for head in (b"", b"{\n", b'{"v":2,"step_seq":7,"turn":2,"step":3,"attempt":1}\n', b'{"v":1}\n', b"[1]\n"):
        journal.path.write_bytes(head + b'{"t":"x"}\n')
        assert read_journal(journal.path) is None, head
    journal.path.unlink()
    assert read_journal(journal.path) is None


def test_a_write_that_fails_stops_journaling_without_stopping_the_stream(tmp_path):
    journal = started(tmp_path)
    os.mkdir(journal.path)  # the journal cannot be opened for writing (as on a full or failing disk)
    journal.text("streams on")  # no exception reaches the stream
    journal.text("and on")
    assert journal.path.is_dir() and read_journal(journal.path) is None
    os.rmdir(journal.path)
    journal.text("still not")
    assert not journal.path.exists()
