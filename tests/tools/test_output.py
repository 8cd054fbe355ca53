"""Bounding results for the model: trim with a visible notice, spill the whole to a private file."""

from __future__ import annotations

import os
import stat

from agent_server.tools.output import SPILL_THRESHOLD, spill, trim_for_model


def test_short_text_is_untouched():
    text = "x" * 8192
    assert trim_for_model(text) == (text, 0)


def test_long_text_keeps_head_and_tail_with_a_notice():
    text = "\n".join(f"line {i:05d}" for i in range(5000))
    out, cut = trim_for_model(text)
    start = out.index("[… ")
    end = out.index("]\n", start) + 2
    head, notice, tail = out[:start], out[start:end], out[end:]
    assert text.startswith(head) and head.endswith("\n")  # cut at a line break
    assert text.endswith(tail) and tail.startswith("line ")
    assert len(head) + cut + len(tail) == len(text)  # nothing lost silently, nothing invented
    assert 4096 - 256 <= len(head) <= 4096 and 1024 - 256 <= len(tail) <= 1024
    assert f"{cut:,} of {len(text):,} characters cut" in notice and "8,192" in notice
    assert "offset/limit" in notice  # how to get the rest
    assert len(out) < 8192


def test_trim_points_at_the_spill_file(tmp_path):
    out, cut = trim_for_model("y" * 20_000, spill_path=tmp_path / "spill" / "a.txt")
    assert cut == 20_000 - 4096 - 1024
    assert out.startswith("y" * 4096 + "\n[…") and out.endswith("]\n" + "y" * 1024)
    assert len(out) == 4096 + 1024 + len(out[4096:-1024])
    assert str(tmp_path / "spill" / "a.txt") in out and "`read`" in out


def test_spill_writes_a_private_file_and_never_overwrites(tmp_path):
    text = "z" * SPILL_THRESHOLD + "\u00e9\n"
    folder = tmp_path / "session" / "spill"
    first = spill(text, folder, name="call_1 bash/out")
    second = spill("other", folder, name="call_1 bash/out")
    assert first.parent == folder and first.name == "call_1_bash_out.txt"
    assert second != first and second.read_text() == "other"
    assert first.read_text(encoding="utf-8") == text
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert spill("a", folder).suffix == ".txt"
