"""Unit checks of the plugin's pure Lua parts (``lua/units.lua``) in a real Neovim, stable and 0.12 dev:
position conversion (emoji, combining marks, CRLF), hunk spans and shifting, the permission diff; and the
scripts beside it (documents that are not UTF-8, `session/list` pages against a fake server)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.nvim import DEV, PLUGIN, STABLE, nvim_binary

UNITS = Path(__file__).resolve().parent / "lua" / "units.lua"


@pytest.mark.parametrize("package", [STABLE, DEV])
def test_lua_units(package):
    run = subprocess.run([str(nvim_binary(package)), "--clean", "--headless", "-l", str(UNITS)],
                         env={**os.environ, "AGENT_SERVER_PLUGIN": str(PLUGIN)}, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "units: ok" in run.stdout, run.stdout + run.stderr


def test_latin1_buffer_is_refused_and_an_answer_that_is_not_utf8_becomes_an_error_not_a_30s_wait():
    """``lua/not_utf8.lua``: the latin1 buffer was reloaded with its raw bytes and sent as is, a line
    the server cannot parse, so the read waited for its 30 s timeout."""
    run = subprocess.run([str(nvim_binary(STABLE)), "--clean", "--headless", "-l", str(UNITS.parent / "not_utf8.lua")],
                         env={**os.environ, "AGENT_SERVER_PLUGIN": str(PLUGIN)}, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "not_utf8: ok" in run.stdout, run.stdout + run.stderr


def test_sessions_picker_reaches_sessions_past_the_first_page_and_a_server_with_endless_cursors_is_stopped():
    """``lua/session_pages.lua``: ``list_sessions`` read only the first ``session/list`` page (50), so
    :AgentSessions never offered the older sessions; now every page, in order, and a cursor sent again,
    the page cap or a failing later page stop the walk with a warning."""
    run = subprocess.run([str(nvim_binary(STABLE)), "--clean", "--headless", "-l", str(UNITS.parent / "session_pages.lua")],
                         env={**os.environ, "AGENT_SERVER_PLUGIN": str(PLUGIN)}, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "session_pages: ok" in run.stdout, run.stdout + run.stderr
