"""End to end in a real VS Code: code-server 4.139.1 with the extension installed from its .vsix,
Chromium driven by playwright-core over the DevTools protocol (clients/vscode/test/e2e/run.mjs), a
real agent-server, and the model played by the offline endpoint (scripted here, one response per
model request, in scenario order). The runner clicks through the scenarios once (one code-server for
all of them); each test below checks its scenario's result there and what only this side can see: the
disk, the model's requests, leftover processes. Screenshots go to clients/vscode/test-artifacts/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time

import pytest
from support.fixtures import agent_server_command
from support.long_answer import markdown_lines
from support.vscode_tools import EXTENSION, REPO, TIMINGS, check_vsix_current, find_tools

from agent_server.offline import OfflineEndpoint, ThreadedEndpoint, text_stream, tool_call_stream

APP = "def greet(name):\n    return 'hello ' + name\n\n\nprint(greet('world'))\n"
STALE = "x = 1\ny = 2\n"
TWO = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\n"
TWO_NEW = "a = 100\nb = 2\nc = 3\nd = 4\ne = 5\nf = 600\n"
REJ = "value = 1\n"
LATIN1 = b"caf\xe9 na\xefve\nsecond line\n"
SLEEP = "sleep 97"
# a tail pushed off screen by 4,200 spaces and hidden from a terminal by an erase-line escape
PERM_COMMAND = "echo allowed > perm.txt" + " " * 4200 + "# \x1b[2K tail"
SLEEP2 = "sleep 98"
# newcomer 5 finding 1: the proposal for plain.txt opens while the user types in the panel
FOCUS = "plain.txt"
FOCUS_TEXT = "one\ntwo\nthree\n"
FOCUS_ANSWER = "Shouted two."
# newcomer 6 finding 3: the user types in calc.py while the proposal for test_calc.py arrives
CALC = "calc.py"
CALC_TEXT = "def add(a, b):\n    return a + b\n"
CALC_TEST = "test_calc.py"
CALC_TEST_TEXT = "import sys\nfrom calc import add\n"
CALC_ANSWER = "Marked the import."
CALC_AFTER = 40  # words typed after the proposal's tab showed


def call(cid: str, name: str, **args) -> tuple[str, str, str]:
    return cid, name, json.dumps(args)


def long_answer_part(step: int, size: int) -> str:
    """``size`` bytes of markdown paragraphs (each with bold and inline code), numbered from ``step``."""
    out, i = [], 0
    while sum(map(len, out)) < size:
        out.append(f"Paragraph {step}.{i}: the answer goes on with **bold {step}.{i}** words and `code_{step}_{i}` "
                   f"and more plain words to fill the line, as a long explanation from a model would. "
                   f"It keeps going a little longer here, to make the paragraph wrap in the panel.\n\n")
        i += 1
    return "".join(out)


# 25 tries sweep the 0-60 ms after Accept in 2.5 ms steps (50 took 54-144 s of CI, each try a model
# round trip and a diff opened and left: the work, not the waits). The bug it guards against went wrong in
# 37 of 50 tries (and 4 of 12 in the issue): 25 tries all passing it by has a chance under 1e-4.
RACE_TRIES = 25
RACE = "race.py"


def race_text(applied: set[int] = frozenset()) -> str:
    """race.py: one line per try, ``v07 = 2`` once try 7's change landed."""
    return "".join(f"v{i:02d} = {2 if i in applied else 1}\n" for i in range(RACE_TRIES))


# issue 30 items 3 and 4: a second window on a multi-root workspace whose first folder is opened
# through a symbolic link (dev -> share, opened as dev/proj), its second folder elsewhere
LINKED = "def area(w, h):\n    return w * h\n"
LINKED_TYPED = "# unsaved line"
SECOND = "limit = 1\n"
# format-on-save (files.trimTrailingWhitespace for [ini]): the proposal's trailing spaces go at save
FMT = "[main]\nkey = 1\n"
FMT_PROPOSED = "[main]\nkey = 2   \n"
# format-on-save for JSON (code-server's built-in formatter): a one-line file, no final newline
CFG_JSON = b'{"a":1,"b":2,"c":[1,2,3]}'
# outside the workspace: a file the runner writes there while the command runs would be /undo's question
EXEC_FLAG = os.path.join(tempfile.gettempdir(), f"agent-server-vscode-e2e-{os.getpid()}.flag")
EXEC_COMMAND = f"printf 'live-%s\\n' one; while [ ! -e {EXEC_FLAG} ]; do sleep 0.1; done; echo finished"
# /undo's three-button question: a BOM and CRLF file the agent changes (line 2), then the user (a line at the end)
MERGE = "merge.txt"
MERGE_BYTES = b"\xef\xbb\xbf" + b"".join(b"line %d\r\n" % i for i in range(1, 11))
MERGE_TYPED = "the user's line"
# a question of session A that comes while the panel shows session B: A's first command waits for this flag
OTHER_FLAG = os.path.join(tempfile.gettempdir(), f"agent-server-vscode-e2e-{os.getpid()}.other")
OTHER_ANSWER = "Wrote elsewhere.txt."
# a question that arrives while the user has scrolled up: the first command waits for this flag
QUESTION_FLAG = os.path.join(tempfile.gettempdir(), f"agent-server-vscode-e2e-{os.getpid()}.question")
QUESTION_ANSWER = "Both commands ran."
NEW_FILE = "notes.md"
MENTION_ANSWER = "I see two.py."
LONG_TOKEN = "build/" + "x" * 400  # one word far wider than the panel
AUTH_401 = {"kind": "error", "status": 401, "json": {"error": {
    "message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}}
NEW_KEY, KEY_RETRY, KEY_ANSWER = "sk-newcomer6-good-key", "Hello again, with the key?", "Answered with the new key."

# newcomer 4 finding 6: line breaks VS Code's text model rewrites (a mix of CRLF and LF; lone CRs);
# MIXED_OPEN (a BOM too) is open in a clean editor when the agent edits it
MIXED = b"a\r\nb\nc\r\nd\n"
CR_ONLY = b"x1\ry2\rz3\r"
MIXED_OPEN = b"\xef\xbb\xbfp\r\nq\nr\r\ns\n"
# newcomer 4 finding 7: a BOM, CRLF and no final newline; the agent splits line 2 while the user types
# (a file of its own: merge.txt is the undo scenario's)
TYPING = "typing.txt"
TYPING_BYTES = b"\xef\xbb\xbfone\r\ntwo\r\nthree"
TYPING_ANSWER = "Split two."
TYPING_NEXT_ANSWER = "Tried three."
# VS Code's "unusual line terminators": U+2028 inside line 1 (a BOM, LF, a final newline)
UNUSUAL = "unusual.txt"
UNUSUAL_BYTES = b"\xef\xbb\xbfa\xe2\x80\xa8b\nsecond\n"
# LASTNOTE (2026-12-07), VS Code: the user's unsaved line over a file the agent's command changes; /undo
# restores the disk under it; then the user saves
UNDO_SAVE = "undosave.txt"
UNDO_SAVE_TEXT = "one\ntwo\nthree\n"
UNDO_SAVE_TYPED = "mine "
UNDO_SAVE_ANSWER = "Shouted three."
# newcomer 5 finding 10: session A's proposal accepted from its diff tab while B is shown; A's next one comes then
F10 = "f10.txt"
F10_NEXT = "f10next.txt"
F10_FLAG = os.path.join(tempfile.gettempdir(), f"agent-server-vscode-e2e-{os.getpid()}.f10")
F10_ANSWER = "Shouted both."
# LASTNOTE: the panel ignored changedFiles' modes (a chmod showed "+0 −0")
MODE_ONLY = "modeonly.sh"
MODE_BOTH = "modeboth.sh"
MODE_ANSWER = "Changed the modes."
# LASTNOTE: the format-on-save difference had no "Show"; the Changes box's diff showed the proposal, not the disk
FMT_JSON = "fmt2.json"
FMT_JSON_ANSWER = "Set b to 3 in fmt2.json."
# newcomer 5 finding 7: the session picker did not say which session waits for an answer
PICKER_ANSWER = "Wrote picked.txt."
RELOAD_PROMPT = "Raise the limit once more"
SWAP_ANSWER = "x.txt was not written."
GONE_ANSWER = "gone.txt is gone; nothing to change."
LONG_STEPS = 20  # each: ~10 KB of text and 3 reads: ~200 KB and 60 tool calls
LONG_END = "LONG-ANSWER-END: all parts written."
# newcomer 4 finding 1: a session whose history holds a 2 MB answer of one-line paragraphs, made before the window opens
REPORT_PROMPT = "Write the very long report"
REPORT_END = "REPORT-END: the last line of the report."
REPORT_DURING = "Sent while the report replays"
REPORT_ANSWER = "Answered after the report."


def report_answer(size: int = 2_000_000) -> str:
    """``size`` bytes of one-line markdown paragraphs with a heading every 50 (the newcomer's fake ``LONG``), then REPORT_END."""
    return markdown_lines(size) + REPORT_END


def make_report_session(workspace, state) -> None:
    """The 2 MB session, made by ``agent-server run`` in the window's workspace and state folder (its own endpoint)."""
    endpoint = ThreadedEndpoint(OfflineEndpoint())
    endpoint.push(text_stream(report_answer(), chunk_size=1400))
    try:
        env = {**os.environ, "AGENT_SERVER_STATE_DIR": str(state), "AGENT_SERVER_SANDBOX": "off",
               "AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_API_KEY": "offline-test-key",
               "AGENT_SERVER_MODEL": "offline-model", "AGENT_SERVER_CONTEXT_WINDOW": "1000000"}
        subprocess.run([*agent_server_command(), "run", "-p", REPORT_PROMPT, "--cwd", str(workspace)],
                       env=env, cwd=workspace, check=True, capture_output=True, timeout=300)
    finally:
        endpoint.stop()


CARDS_PROMPT = "Read the three files a hundred times"
CARDS_STEPS = 100
CARDS_END = "CARDS-END: read them all."


def make_cards_session(workspace, state) -> None:
    """A session of CARDS_STEPS * 3 read cards (a line of text each step), made by ``agent-server run`` in
    the window's workspace and state folder before the window opens (its own endpoint)."""
    endpoint = ThreadedEndpoint(OfflineEndpoint())
    for k in range(CARDS_STEPS):
        endpoint.push(tool_call_stream([call(f"c{k}.{j}", "read", path=name) for j, name in enumerate(("app.py", "two.py", "rej.py"))],
                                       text=f"Step {k}: reading the three files again."))
    endpoint.push(text_stream(CARDS_END))
    try:
        env = {**os.environ, "AGENT_SERVER_STATE_DIR": str(state), "AGENT_SERVER_SANDBOX": "off",
               "AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_API_KEY": "offline-test-key",
               "AGENT_SERVER_MODEL": "offline-model", "AGENT_SERVER_CONTEXT_WINDOW": "1000000",
               "AGENT_SERVER_CONFIG": str(state.parent / "config.toml")}
        subprocess.run([*agent_server_command(), "run", "-p", CARDS_PROMPT, "--cwd", str(workspace)],
                       env=env, cwd=workspace, check=True, capture_output=True, timeout=300)
    finally:
        endpoint.stop()


STREAMED = " ".join(f"word{k}" for k in range(150))


def script(names: list[str], second: str = "/nonexistent/second", linked: str = "/nonexistent/linked.py") -> list[dict]:
    """The model's answers for the scenarios ``names``, in order (``second``: the multi-root
    workspace's second folder; ``linked``: the real path of linked.py, behind the link)."""
    by_name = {
        "accept_in_unsaved_document": [
            tool_call_stream([call("r1", "read", path="app.py")]),
            tool_call_stream([call("e1", "edit", path="app.py", old_string="return 'hello ' + name",
                                   new_string="return 'hi ' + name")]),
            text_stream("Changed the greeting."),
        ],
        # the user types into the document while the proposal is shown
        "stale_proposal": [
            tool_call_stream([call("r2", "read", path="stale.py")]),
            tool_call_stream([call("e2", "edit", path="stale.py", old_string="x = 1", new_string="x = 10")]),
            text_stream("The file changed; I will read it again later."),
            # newcomer finding F7: gone.txt is deleted while this proposal waits
            tool_call_stream([call("r13", "read", path="gone.txt")]),
            tool_call_stream([call("e13", "edit", path="gone.txt", old_string="x", new_string="y")]),
            text_stream(GONE_ANSWER),
        ],
        "accept_one_hunk_of_two": [
            tool_call_stream([call("r3", "read", path="two.py")]),
            tool_call_stream([call("w3", "write", path="two.py", content=TWO_NEW)]),
            text_stream("Two changes proposed."),
        ],
        # finding 20: sub/ is swapped for a link to a folder outside while the proposal waits
        "symlink_swapped_while_a_proposal_waits": [
            tool_call_stream([call("w20", "write", path="sub/x.txt", content="pwned\n")]),
            text_stream(SWAP_ANSWER),
        ],
        "reject_tells_the_model": [
            tool_call_stream([call("r4", "read", path="rej.py")]),
            tool_call_stream([call("e4", "edit", path="rej.py", old_string="value = 1", new_string="value = 2")]),
            text_stream("Understood, left as is."),
        ],
        # newcomer 5 finding 1: the user types on in the panel while this proposal opens
        "typing_in_the_panel_while_a_proposal_opened": [
            tool_call_stream([call("r22", "read", path=FOCUS)]),
            tool_call_stream([call("e22", "edit", path=FOCUS, old_string="two", new_string="TWO")]),
            text_stream(FOCUS_ANSWER),
        ],
        # newcomer 6 finding 3: the edit streams over ~3 s, the user typing in calc.py meanwhile
        "typing_in_another_file_while_a_proposal_arrived": [
            tool_call_stream([call("c23", "read", path=CALC_TEST)]),
            tool_call_stream([call("c24", "edit", path=CALC_TEST, old_string="import sys", new_string="import sys  # x")],
                             delay=0.3),
            text_stream(CALC_ANSWER),
        ],
        # one paragraph streamed slowly (about 5 s), /mode typed meanwhile
        "slash_command_during_a_stream": [text_stream(STREAMED, delay=0.04)],
        "shell_permission_allow_once": [
            tool_call_stream([call("b5", "bash", command=PERM_COMMAND, description="Write perm.txt")]),
            text_stream("Wrote perm.txt."),
        ],
        "stop_during_slow_tool": [tool_call_stream([call("b6", "bash", command=SLEEP, description="Wait")])],
        # the stop scenario's turn made no further request
        "server_killed_mid_turn": [
            tool_call_stream([call("b7", "bash", command=SLEEP2, description="Wait again")]),
            text_stream("Back again after the crash."),
        ],
        # by its real path (/…/share/proj/linked.py), as a model that ran `pwd -P` or read a
        # resolved path from a tool's output names it; the window has it open as /…/dev/proj/linked.py
        "symlinked_workspace_one_document": [
            tool_call_stream([call("r9", "read", path=linked)]),
            tool_call_stream([call("e9", "edit", path=linked, old_string="return w * h",
                                   new_string="return w * h  # area")]),
            text_stream("Commented the area."),
        ],
        "multi_root_edit_lands": [
            tool_call_stream([call("r10", "read", path=f"{second}/second.py")]),
            tool_call_stream([call("e10", "edit", path=f"{second}/second.py", old_string="limit = 1",
                                   new_string="limit = 2")]),
            text_stream("Raised the limit in the second folder."),
        ],
        "restart_server_resumes_the_session": [text_stream("Still here after the restart.")],
        # a proposal waits when the window reloads (newcomer finding F4)
        "window_reload_reopens_the_session": [
            tool_call_stream([call("r12", "read", path=f"{second}/second.py")]),
            tool_call_stream([call("e12", "edit", path=f"{second}/second.py", old_string="limit = 2",
                                   new_string="limit = 3")]),
        ],
        "json_format_on_save_and_undo": [
            tool_call_stream([call("rj1", "read", path="cfg.json")]),
            tool_call_stream([call("ej1", "edit", path="cfg.json", old_string='"b":2', new_string='"b":3')]),
            text_stream("Set b to 3."),
        ],
        "format_on_save_told_to_the_model": [
            tool_call_stream([call("r11", "read", path="fmt.ini")]),
            tool_call_stream([call("w11", "write", path="fmt.ini", content=FMT_PROPOSED)]),
            text_stream("Set key to 2."),
        ],
        "mixed_line_endings_byte_exact": [
            tool_call_stream([call("rm1", "read", path="mixed.txt")]),
            tool_call_stream([call("em1", "edit", path="mixed.txt", old_string="b", new_string="B")]),
            text_stream("Shouted b."),
            tool_call_stream([call("rc1", "read", path="cr.txt")]),
            tool_call_stream([call("ec1", "edit", path="cr.txt", old_string="y2", new_string="Y2")]),
            text_stream("Shouted y2."),
            tool_call_stream([call("ro1", "read", path="mixedopen.txt")]),
            tool_call_stream([call("eo1", "edit", path="mixedopen.txt", old_string="q", new_string="Q")]),
            text_stream("Shouted q."),
            tool_call_stream([call("wn1", "write", path="crlfnew.txt", content="x\r\ny\r\n")]),
            text_stream("Created crlfnew.txt."),
            tool_call_stream([call("ro2", "read", path="mixedopen.txt")]),
            tool_call_stream([call("eo2", "edit", path="mixedopen.txt", old_string="s", new_string="S")]),
            text_stream("Shouted s."),
        ],
        "undo_takes_back_only_the_agents_change": [
            tool_call_stream([call("r21", "read", path=MERGE)]),
            tool_call_stream([call("e21", "edit", path=MERGE, old_string="line 2", new_string="line 2 by the agent")]),
            text_stream("Changed line 2."),
        ],
        "question_arrives_while_scrolled_up": [
            tool_call_stream([call("q1", "bash", command=f"while [ ! -e {QUESTION_FLAG} ]; do sleep 0.1; done; echo first",
                                   description="Wait for the flag")], text=long_answer_part(0, 20_000)),
            tool_call_stream([call("q2", "bash", command="echo second > question.txt", description="Write question.txt")]),
            text_stream(QUESTION_ANSWER),
        ],
        "question_of_another_session_stays_with_it": [
            tool_call_stream([call("os1", "bash", command=f"while [ ! -e {OTHER_FLAG} ]; do sleep 0.1; done; echo first",
                                   description="Wait for the other flag")]),
            tool_call_stream([call("os2", "bash", command="echo second > elsewhere.txt", description="Write elsewhere.txt")]),
            text_stream(OTHER_ANSWER),
        ],
        "latin1_refused": [
            tool_call_stream([call("r8", "read", path="latin1.txt")]),
            tool_call_stream([call("e8", "edit", path="latin1.txt", old_string="second line",
                                   new_string="SECOND LINE")]),
            text_stream("Left latin1.txt as it is."),
        ],
        # each try reads race.py again (the user typed since) and changes its own line, streamed over
        # ~0.3 s: the next diff (it takes the focus) opens after this try's keystrokes
        "keystrokes_right_after_accept_never_garble": [
            *(tool_call_stream([call(f"rr{i}", "read", path=RACE),
                                call(f"re{i}", "edit", path=RACE, old_string=f"v{i:02d} = 1",
                                     new_string=f"v{i:02d} = 2")], delay=0.02) for i in range(RACE_TRIES)),
            text_stream("Race done."),
        ],
        # newcomer 4 finding 7: the user types on other lines while the proposal waits (merged), then
        # at the end of the line the next change is on (stale)
        "typing_on_another_line_while_a_proposal_waited": [
            tool_call_stream([call("mg1", "read", path=TYPING)]),
            tool_call_stream([call("mg2", "edit", path=TYPING, old_string="two\n", new_string="TWO\nmore\n")]),
            text_stream(TYPING_ANSWER),
            tool_call_stream([call("mg3", "read", path=TYPING)]),
            tool_call_stream([call("mg4", "edit", path=TYPING, old_string="three", new_string="THREE")]),
            text_stream(TYPING_NEXT_ANSWER),
        ],
        "unusual_line_terminators_asked_once_at_most": [
            tool_call_stream([call("ul1", "read", path=UNUSUAL)]),
            tool_call_stream([call("ul2", "edit", path=UNUSUAL, old_string="second", new_string="SECOND")]),
            text_stream("Shouted second."),
        ],
        "saving_after_undo_restored_the_disk_under_unsaved_text": [
            tool_call_stream([call("us1", "bash", command=f"sed -i s/three/THREE-AND-MORE/ {UNDO_SAVE}", description="Shout three")]),
            text_stream(UNDO_SAVE_ANSWER),
        ],
        "a_proposal_accepted_from_its_diff_tab_after_switching_sessions": [
            tool_call_stream([call("f1", "read", path=F10)]),
            tool_call_stream([call("f2", "edit", path=F10, old_string="b", new_string="B")]),
            tool_call_stream([call("f3", "bash", command=f"while [ ! -e {F10_FLAG} ]; do sleep 0.1; done; echo waited",
                                   description="Wait for the f10 flag")]),
            tool_call_stream([call("f4", "read", path=F10_NEXT)]),
            tool_call_stream([call("f5", "edit", path=F10_NEXT, old_string="b", new_string="B")]),
            text_stream(F10_ANSWER),
        ],
        "a_mode_only_change_showed_plus_0_minus_0": [
            tool_call_stream([call("m1", "bash", command=f"chmod 600 {MODE_ONLY}; echo x >> {MODE_BOTH}; chmod 755 {MODE_BOTH}",
                                   description="Change the modes")]),
            text_stream(MODE_ANSWER),
        ],
        "the_format_on_save_difference_could_not_be_seen": [
            tool_call_stream([call("fj1", "read", path=FMT_JSON)]),
            tool_call_stream([call("fj2", "edit", path=FMT_JSON, old_string='"b":2', new_string='"b":3')]),
            text_stream(FMT_JSON_ANSWER),
        ],
        "the_session_picker_did_not_flag_a_session_waiting_for_an_answer": [
            tool_call_stream([call("sp1", "bash", command="echo picked > picked.txt", description="Write picked.txt")]),
            text_stream(PICKER_ANSWER),
        ],
        "auth_error_offers_the_way_forward": [AUTH_401, text_stream(KEY_ANSWER)],
        "execute_cards_and_daily_features": [
            tool_call_stream([call("x1", "bash", command=EXEC_COMMAND, description="Print and wait")]),
            tool_call_stream([call("x2", "read", path="app.py", offset=3),
                              call("x3", "write", path=NEW_FILE, content="# Notes\n")]),
            text_stream("Ran it, read it, wrote notes. " + LONG_TOKEN),
            text_stream(MENTION_ANSWER),
        ],
        "long_answer_stays_bounded": [
            *(tool_call_stream([call(f"l{k}.{j}", "read", path=name) for j, name in enumerate(("app.py", "two.py", "rej.py"))],
                               text=long_answer_part(k, 10_000)) for k in range(LONG_STEPS)),
            text_stream(long_answer_part(LONG_STEPS, 2000) + LONG_END),
        ],
        "two_megabyte_replay_stays_usable": [text_stream(REPORT_ANSWER)],
    }
    return [response for name in names for response in by_name.get(name, [])]


SCENARIOS = [
    {"name": "panel_prestarts_the_server", "otherFolder": "<set by the fixture>"},
    {"name": "first_run_empty_state"},
    {"name": "accept_in_unsaved_document", "file": "app.py", "typed": "# unsaved note",
     "question": "Make greet say hi", "command": "/checkpoints", "commandAnswer": "No checkpoints yet",
     "tweakLine": 1, "tweak": "  # user tweak",
     "expected": APP.replace("'hello ' + name", "'hi ' + name  # user tweak") + "# unsaved note"},
    {"name": "stale_proposal", "file": "stale.py", "question": "Rename x", "readTitle": "stale.py",
     "typed": "  # typed", "expected": STALE.replace("x = 1", "x = 1  # typed", 1),
     "goneFile": "gone.txt", "gonePrompt": "Change x to y in gone.txt", "goneAnswer": GONE_ANSWER},
    {"name": "accept_one_hunk_of_two", "prompt": "Change a and f in two.py"},
    {"name": "reject_tells_the_model", "prompt": "Change value in rej.py"},
    {"name": "typing_in_the_panel_while_a_proposal_opened", "prompt": "Shout two in plain.txt", "after": "and the next",
     "proposed": FOCUS_TEXT.replace("two", "TWO"), "answer": FOCUS_ANSWER},
    {"name": "typing_in_another_file_while_a_proposal_arrived", "file": CALC, "other": CALC_TEST,
     "prompt": "Mark the import in test_calc.py", "after": CALC_AFTER, "answer": CALC_ANSWER},
    {"name": "symlink_swapped_while_a_proposal_waits", "prompt": "Write sub/x.txt", "folder": "sub",
     "outside": "<set by the fixture>", "answer": SWAP_ANSWER},
    {"name": "slash_command_during_a_stream", "prompt": "Stream the words", "command": "/mode"},
    {"name": "shell_permission_allow_once", "prompt": "Write perm.txt with the shell", "toolTitle": "Write perm.txt"},
    {"name": "stop_during_slow_tool", "prompt": "Wait a while", "toolTitle": "Wait"},
    {"name": "session_picker_loads_history", "title": "Make greet say hi", "expect": "Changed the greeting.",
     "expectTool": "Edit app.py"},
    {"name": "server_killed_mid_turn", "prompt": "Wait once more", "toolTitle": "Wait again",
     "next": "Are you there?", "answer": "Back again after the crash."},
    {"name": "latin1_refused", "file": "latin1.txt", "prompt": "Shout the second line of latin1.txt",
     "answer": "Left latin1.txt as it is."},
    {"name": "keystrokes_right_after_accept_never_garble", "prompt": "Set every value to 2",
     "file": RACE, "tries": RACE_TRIES, "typed": "zz", "answer": "Race done."},
    {"name": "typing_on_another_line_while_a_proposal_waited", "file": TYPING, "bytes": TYPING_BYTES.hex(),
     "prompt": "Split two in typing.txt", "answer": TYPING_ANSWER, "nextPrompt": "Shout three in typing.txt",
     "nextLine": 5, "nextAnswer": TYPING_NEXT_ANSWER},
    {"name": "unusual_line_terminators_asked_once_at_most", "file": UNUSUAL, "bytes": UNUSUAL_BYTES.hex(),
     "prompt": "Shout second in unusual.txt", "answer": "Shouted second."},
    {"name": "auth_error_offers_the_way_forward", "prompt": "Hello?", "pickMode": "Read-only", "pickModeId": "read-only",
     "newKey": NEW_KEY, "retry": KEY_RETRY, "retryAnswer": KEY_ANSWER},
    {"name": "execute_cards_and_daily_features", "prompt": "Run it, read app.py and write notes",
     "liveText": "live-one", "flag": EXEC_FLAG, "answer": "Ran it, read it, wrote notes.", "readFile": "app.py", "readLine": 3,
     "newFile": NEW_FILE, "undoSays": "Undo turn", "mentionFile": "two.py", "mentionPrompt": "What is in it?",
     "mentionAnswer": MENTION_ANSWER},
    {"name": "long_answer_stays_bounded", "prompt": "Explain everything at length", "answer": LONG_END,
     "first": "Paragraph 0.0:"},
    {"name": "two_megabyte_replay_stays_usable", "title": REPORT_PROMPT, "prompt": REPORT_DURING, "end": REPORT_END,
     "answer": REPORT_ANSWER, "first": "Line 0: some"},
    # the sessions of this window: "Make greet say hi" (the first) and "Explain everything at length"
    {"name": "session_quickpick_searches_and_deletes", "search": "greet", "title": "Make greet say hi"},
    {"name": "format_on_save_told_to_the_model", "prompt": "Set key to 2 in fmt.ini", "file": "fmt.ini",
     "answer": "Set key to 2."},
    {"name": "mixed_line_endings_byte_exact", "mixed": "mixed.txt", "mixedPrompt": "Shout b in mixed.txt",
     "mixedAnswer": "Shouted b.", "cr": "cr.txt", "crPrompt": "Shout y2 in cr.txt", "crAnswer": "Shouted y2.",
     "open": "mixedopen.txt", "openPrompt": "Shout q in mixedopen.txt", "openAnswer": "Shouted q.", "openShows": "Q",
     "created": "crlfnew.txt", "createPrompt": "Create crlfnew.txt", "createAnswer": "Created crlfnew.txt.",
     "autoPrompt": "Shout s in mixedopen.txt", "autoAnswer": "Shouted s."},
    {"name": "undo_takes_back_only_the_agents_change", "prompt": "Change line 2 of merge.txt", "file": MERGE,
     "answer": "Changed line 2.", "typed": MERGE_TYPED, "undoSays": "only the agent's change taken back"},
    {"name": "json_format_on_save_and_undo", "prompt": "Set b to 3 in cfg.json", "file": "cfg.json",
     "answer": "Set b to 3."},
    {"name": "a_proposal_accepted_from_its_diff_tab_after_switching_sessions", "file": F10, "nextFile": F10_NEXT,
     "text": "a\nb\nc\n", "prompt": "Shout b in f10.txt, wait, then in f10next.txt", "flag": F10_FLAG,
     "commandTitle": "Wait for the f10 flag", "answer": F10_ANSWER},
    {"name": "a_mode_only_change_showed_plus_0_minus_0", "file": MODE_ONLY, "both": MODE_BOTH, "text": "echo hi\n",
     "prompt": "Make modeonly.sh private and modeboth.sh runnable", "answer": MODE_ANSWER},
    {"name": "the_format_on_save_difference_could_not_be_seen", "file": FMT_JSON, "text": CFG_JSON.decode(),
     "prompt": "Set b to 3 in fmt2.json", "answer": FMT_JSON_ANSWER},
    {"name": "the_session_picker_did_not_flag_a_session_waiting_for_an_answer", "prompt": "Write picked.txt with the shell",
     "answer": PICKER_ANSWER},
    # the long answer's session (long_answer_stays_bounded, above) replayed
    {"name": "a_replay_of_hundreds_of_cards_was_drawn_in_one_task", "title": CARDS_PROMPT, "end": CARDS_END},
    {"name": "saving_after_undo_restored_the_disk_under_unsaved_text", "file": UNDO_SAVE, "text": UNDO_SAVE_TEXT,
     "typed": UNDO_SAVE_TYPED, "prompt": "Shout three in undosave.txt with the shell", "answer": UNDO_SAVE_ANSWER},
    {"name": "question_arrives_while_scrolled_up", "prompt": "Wait for the flag, then write question.txt",
     "flag": QUESTION_FLAG, "answer": QUESTION_ANSWER},
    {"name": "question_of_another_session_stays_with_it", "prompt": "Wait for the other flag, then write elsewhere.txt",
     "flag": OTHER_FLAG, "question": "Write elsewhere.txt", "answer": OTHER_ANSWER},
    # the second window (a multi-root workspace, its first folder opened through a symlink)
    {"name": "symlinked_workspace_one_document", "workspaceFile": "<set by the fixture>", "file": "linked.py",
     "typed": LINKED_TYPED, "prompt": "Comment the area", "answer": "Commented the area.",
     "expected": LINKED.replace("return w * h", "return w * h  # area") + LINKED_TYPED},
    {"name": "multi_root_edit_lands", "workspaceFile": "<set by the fixture>", "file": "second.py",
     "prompt": "Raise the limit in the second folder", "answer": "Raised the limit in the second folder."},
    {"name": "restart_server_resumes_the_session", "workspaceFile": "<set by the fixture>",
     "prompt": "Still there after the restart?", "answer": "Still here after the restart."},
    {"name": "window_reload_reopens_the_session", "workspaceFile": "<set by the fixture>",
     "proposalPrompt": RELOAD_PROMPT,
     "users": ["Comment the area", "Still there after the restart?", RELOAD_PROMPT], "answer": "Still here after the restart."},
]


def chosen() -> list[dict]:
    """The scenarios to run: all, or those named in AGENT_SERVER_VSCODE_SCENARIOS (comma-separated;
    for working on one scenario: the others' tests then fail as not run)."""
    names = [n for n in os.environ.get("AGENT_SERVER_VSCODE_SCENARIOS", "").split(",") if n]
    return [s for s in SCENARIOS if not names or s["name"] in names]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Runs every scenario once; yields (results, workspace, endpoint)."""
    tools = find_tools()
    check_vsix_current()
    for flag in (EXEC_FLAG, QUESTION_FLAG, OTHER_FLAG, F10_FLAG):
        if os.path.exists(flag):
            os.remove(flag)
    tmp = tmp_path_factory.mktemp("vscode")
    workspace = (tmp / "workspace").resolve()
    workspace.mkdir()
    for name, text in {"app.py": APP, "stale.py": STALE, "two.py": TWO, "rej.py": REJ, "gone.txt": "x\n",
                       FOCUS: FOCUS_TEXT, CALC: CALC_TEXT, CALC_TEST: CALC_TEST_TEXT}.items():
        (workspace / name).write_text(text)
    (workspace / "latin1.txt").write_bytes(LATIN1)
    for name, raw in {"mixed.txt": MIXED, "cr.txt": CR_ONLY, "mixedopen.txt": MIXED_OPEN}.items():
        (workspace / name).write_bytes(raw)
    (workspace / MERGE).write_bytes(MERGE_BYTES)
    (workspace / RACE).write_text(race_text())
    (workspace / "fmt.ini").write_text(FMT)
    (workspace / "cfg.json").write_bytes(CFG_JSON)
    # the second window: dev -> share, the workspace's first folder is dev/proj (through the link)
    share = (tmp / "share").resolve()
    (share / "proj").mkdir(parents=True)
    (share / "proj" / "linked.py").write_text(LINKED)
    (tmp / "dev").symlink_to(share)
    second = (tmp / "second").resolve()
    second.mkdir()
    (second / "second.py").write_text(SECOND)
    multi = tmp / "multi.code-workspace"
    multi.write_text(json.dumps({"folders": [{"path": str(tmp / "dev" / "proj")}, {"path": str(second)}]}))
    # A repository that ships .vscode/settings.json choosing the server binary (the trap leaves a
    # mark and then runs the real server, so only test_workspace_settings_… fails if it is obeyed)
    trap = tmp / "trap"
    trap.mkdir()
    (trap / "run.sh").write_text(f"#!/bin/sh\necho started > '{trap / 'pwned'}'\n"
                                 f"exec '{agent_server_command()[0]}' \"$@\"\n")
    (trap / "run.sh").chmod(0o755)
    (workspace / ".vscode").mkdir()
    # … and trims trailing whitespace of .ini files at save (a format-on-save the agent must be told of)
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({
        "agentServer.path": str(trap / "run.sh"), "[ini]": {"files.trimTrailingWhitespace": True},
        "[json]": {"editor.formatOnSave": True, "files.insertFinalNewline": True}}))
    # the keystroke race's tries are a model request each, in one turn
    (tmp / "config.toml").write_text("[agent]\nmax_steps_per_turn = 200\n")
    artifacts = EXTENSION / "test-artifacts"
    endpoint = ThreadedEndpoint(OfflineEndpoint())
    other = (tmp / "never-shows-the-panel").resolve()
    other.mkdir()
    (other / "notes.txt").write_text("a folder whose window never shows the Agent panel\n")
    (workspace / "sub").mkdir()
    outside = (tmp / "outside-dir").resolve()
    outside.mkdir()
    if any(s["name"] == "two_megabyte_replay_stays_usable" for s in chosen()):
        make_report_session(workspace, tmp / "state")
    if any(s["name"] == "a_replay_of_hundreds_of_cards_was_drawn_in_one_task" for s in chosen()):
        make_cards_session(workspace, tmp / "state")
    scenarios = [{**s, "otherFolder": str(other)} if "otherFolder" in s else s for s in chosen()]
    scenarios = [{**s, "outside": str(outside)} if "outside" in s else s for s in scenarios]
    scenarios = [{**s, "workspaceFile": str(multi), "folders": [str(tmp / "dev" / "proj"), str(second)]}
                 if "workspaceFile" in s else s for s in scenarios]
    for response in script([s["name"] for s in scenarios], str(second), str(share / "proj" / "linked.py")):
        endpoint.push(response)
    config = {
        "node": tools.node, "codeServerEntry": tools.code_server_entry, "chromium": tools.chromium,
        "vsix": tools.vsix, "workspace": str(workspace), "artifacts": str(artifacts), "tmp": str(tmp),
        "results": str(tmp / "results.json"), "stopOnFailure": False, "scenarios": scenarios,
        "settings": {"agentServer.path": agent_server_command()[0], "agentServer.baseUrl": endpoint.base_url},
        "env": {"AGENT_SERVER_STATE_DIR": str(tmp / "state"), "AGENT_SERVER_SANDBOX": "off",
                "AGENT_SERVER_CONFIG": str(tmp / "config.toml"),
                "AGENT_SERVER_API_KEY": "offline-test-key", "AGENT_SERVER_MODEL": "offline-model",
                "AGENT_SERVER_LOG_LEVEL": "INFO",
                # the long answer (~200 KB) fits: no compaction request takes a scripted answer
                "AGENT_SERVER_CONTEXT_WINDOW": "1000000"},
    }
    (tmp / "config.json").write_text(json.dumps(config))
    started = time.monotonic()
    proc = subprocess.run([tools.node, str(EXTENSION / "test" / "e2e" / "run.mjs"), str(tmp / "config.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)  # a hang guard: 900 s was passed at load 16
    took = time.monotonic() - started
    results_file = tmp / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    TIMINGS.append(f"vscode e2e: the editor scenarios took {took:.0f} s (code-server + Chromium startup "
                   f"{results.get('timings', {}).get('startup_s', '?')} s)")
    TIMINGS.append("vscode e2e: by scenario: " + ", ".join(
        f"{name} {got.get('seconds', 0):.0f} s" for name, got in results.get("scenarios", {}).items()))
    if results.get("error") or not results:
        pytest.fail(f"the VS Code runner failed: {results.get('error')}\nstdout:\n{proc.stdout[-3000:]}\n"
                    f"stderr:\n{proc.stderr[-3000:]}\ncode-server:\n{results.get('codeServerLogTail', '')}")
    yield results, workspace, endpoint
    endpoint.stop()
    for flag in (EXEC_FLAG, QUESTION_FLAG, OTHER_FLAG, F10_FLAG):
        if os.path.exists(flag):
            os.remove(flag)


def model_requests_after(endpoint, text: str) -> list[list[dict]]:
    """The messages of each model request whose last user message contains ``text``."""
    out = []
    for r in endpoint.requests:
        if not r.path.endswith("/chat/completions"):
            continue
        messages = r.json()["messages"]
        users = [m for m in messages if m["role"] == "user"]
        if users and text in json.dumps(users[-1]["content"]):
            out.append(messages)
    return out


def scenario(run, name):
    results, _, _ = run
    got = results["scenarios"].get(name)
    assert got is not None, f"scenario {name} did not run (an earlier one broke the runner?)"
    assert got["ok"], f"{name} failed in VS Code (screenshot in clients/vscode/test-artifacts/):\n{got.get('error')}"


def chat_requests(endpoint):
    """The model requests (the panel's first-run page also asks the endpoint's /models)."""
    return [r for r in endpoint.requests if r.path.endswith("/chat/completions")]


def tool_results(endpoint, call_id):
    return [m["content"] for r in endpoint.requests if r.path.endswith("/chat/completions")
            for m in r.json()["messages"] if m["role"] == "tool" and m.get("tool_call_id") == call_id]


def test_accept_in_unsaved_document_applies_exactly_and_leaves_it_unsaved(run):
    scenario(run, "accept_in_unsaved_document")
    _, workspace, endpoint = run
    assert (workspace / "app.py").read_text() == APP  # the disk keeps the saved text
    first = chat_requests(endpoint)[0].json()["messages"]
    user = "\n".join(json.dumps(m["content"]) for m in first if m["role"] == "user")
    assert "app.py" in user and "1-2" in user  # the selection went out with its line range
    assert "unsaved note" in tool_results(endpoint, "r1")[0]  # the agent read the unsaved buffer


def test_vscode_proposed_text_edited_before_accepting_is_what_lands_and_the_model_is_told(run):
    scenario(run, "accept_in_unsaved_document")  # the document holds the user's tweak (checked in VS Code)
    _, _, endpoint = run
    told = tool_results(endpoint, "e1")[0]
    assert "The user adjusted your change before accepting it" in told and "+    return 'hi ' + name  # user tweak" in told
    # … and the user is told too (newcomer 5, finding 1: the card said only "Applied")
    assert "with your changes" in run[0]["scenarios"]["accept_in_unsaved_document"]["outcome"]


def test_vscode_slash_command_while_a_proposal_waits_leaves_the_turn_running_and_its_cards_open(run):
    scenario(run, "accept_in_unsaved_document")
    results, _, _ = run
    assert results["scenarios"]["accept_in_unsaved_document"]["afterCommand"] == {
        "state": "busy", "unfinishedCards": 0, "pendingProposals": 1}


def test_document_changed_after_the_read_is_stale_when_accepted_and_nothing_is_applied(run):
    scenario(run, "stale_proposal")
    _, workspace, endpoint = run
    assert (workspace / "stale.py").read_text() == STALE
    assert any("read it again" in t or "changed" in t for t in tool_results(endpoint, "e2"))


def test_accepting_a_proposal_for_a_file_deleted_meanwhile_re_created_it_without_a_stale_warning(run):
    """Newcomer finding F7: the agent read and edited gone.txt (x -> y); `rm gone.txt` while the
    proposal waited; Accept All re-created it with y. Now the card turns stale at once, Accept is
    answered stale (the model is told the file was deleted on disk) and the file stays gone."""
    scenario(run, "stale_proposal")
    results, workspace, endpoint = run
    got = results["scenarios"]["stale_proposal"]["gone"]
    assert got == {"staleAtOnce": True, "recreated": False}, got
    assert not (workspace / "gone.txt").exists()
    told = tool_results(endpoint, "e13")[0]
    assert "deleted on disk" in told, told


def test_accepting_one_hunk_of_two_applies_only_that_hunk(run):
    scenario(run, "accept_one_hunk_of_two")
    _, workspace, endpoint = run
    assert (workspace / "two.py").read_text() == TWO.replace("a = 1\n", "a = 100\n")  # saved: it was not open
    assert any("1 of 2" in t for t in tool_results(endpoint, "w3"))


def test_the_changes_box_stays_after_a_partly_applied_turn(run):
    """N2 (re-checked): the "Changes of the last turn" box was said to vanish after some hunks were
    accepted and some rejected; it is drawn from what the server says (`_meta.agentServer.changedFiles`
    of the call that wrote the accepted hunk), and names the file."""
    scenario(run, "accept_one_hunk_of_two")
    got = run[0]["scenarios"]["accept_one_hunk_of_two"]
    assert got["changesShown"], got
    assert "two.py" in got["changes"], got


def test_a_slash_command_answered_while_an_answer_streamed_split_the_answer_mid_word(run):
    """/mode typed while the model streams a long answer: the panel broke the answer mid-word (the
    command's answer landed inside the streaming message, the rest went on as a new block). The
    chunks carry ACP's messageId: the answer is one message, the command's answer apart below it."""
    scenario(run, "slash_command_during_a_stream")
    got = run[0]["scenarios"]["slash_command_during_a_stream"]
    assert "word149" not in got["streamedWhenAnswered"], got  # /mode was answered mid-stream
    kinds = [kind for kind, _ in got["after"]]
    assert kinds == ["agent", "user", "agent"], got
    assert got["after"][0][1] == STREAMED, got
    assert got["after"][1][1] == "/mode" and got["after"][2][1].startswith("Mode:"), got


def test_typing_the_next_prompt_in_the_panel_while_a_proposal_opened_went_into_the_proposed_file(run):
    """Newcomer 5, finding 1: the diff editor of an arriving proposal took the keyboard focus from the
    panel's input; the next prompt being typed landed in the proposed side (and was written on Accept)."""
    scenario(run, "typing_in_the_panel_while_a_proposal_opened")
    results, workspace, _ = run
    got = results["scenarios"]["typing_in_the_panel_while_a_proposal_opened"]
    assert got["input"] == got["typed"] and got["typed"].endswith("and the next")
    assert (workspace / FOCUS).read_text() == FOCUS_TEXT.replace("two", "TWO")
    assert got["outcome"].startswith("Applied") and "with your changes" not in got["outcome"]


def test_typing_in_another_file_while_a_proposal_arrived_lost_every_keystroke_after_it(run):
    """Newcomer 6, finding 3: the user typed in calc.py while the agent's proposal for test_calc.py
    arrived; its diff opened in front of calc.py (preserveFocus kept the focus in an editor no longer
    shown) and every word typed after it went to the workbench's body: w15 … w59 lost. The diff opens
    behind calc.py, a notification offers Review: every word is in calc.py, and the proposal lands."""
    scenario(run, "typing_in_another_file_while_a_proposal_arrived")
    results, workspace, _ = run
    got = results["scenarios"]["typing_in_another_file_while_a_proposal_arrived"]
    assert got["before"] >= 1, got  # the proposal came while the user typed (not before the first word)
    assert len(got["words"]) >= got["before"] + CALC_AFTER, got
    assert (workspace / CALC).read_text() == CALC_TEXT + "\n" + "".join(f"{w} " for w in got["words"]), got
    # calc.py stayed in front, the keyboard in it, all along
    assert got["frontTab"].startswith(CALC), got
    assert all(w.split(":", 1)[1] == f"{CALC}|editor" for w in got["where"]), got["where"]
    assert "waits for your review" in got["notified"], got
    assert (workspace / CALC_TEST).read_text() == CALC_TEST_TEXT.replace("import sys", "import sys  # x")


def test_reject_tells_the_model(run):
    scenario(run, "reject_tells_the_model")
    _, workspace, endpoint = run
    assert (workspace / "rej.py").read_text() == REJ
    assert any("reject" in t.lower() for t in tool_results(endpoint, "e4"))


def test_an_accepted_proposal_was_written_through_a_symlink_swapped_in_while_it_waited(run):
    """Finding 20 (VS Code): ``sub`` was a folder when the proposal to create ``sub/x.txt`` came;
    another process swapped it for a link to a folder outside the workspace while it waited, and
    Accept All wrote ``x.txt`` there. Checked again right before the write: stale, with words."""
    scenario(run, "symlink_swapped_while_a_proposal_waits")
    results, workspace, endpoint = run
    got = results["scenarios"]["symlink_swapped_while_a_proposal_waits"]
    assert not (workspace.parent / "outside-dir" / "x.txt").exists()
    assert got["outcome"] == "stale", got
    told = " ".join(tool_results(endpoint, "w20"))
    assert "the path now leads outside the workspace" in told, told


def test_shell_permission_answered_allow_once_runs_the_command(run):
    scenario(run, "shell_permission_allow_once")
    _, workspace, _ = run
    assert (workspace / "perm.txt").read_text() == "allowed\n"


def test_stop_during_a_slow_tool_cancels_the_turn_and_its_command(run):
    scenario(run, "stop_during_slow_tool")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not [line for line in ps.splitlines() if line.strip() == SLEEP]


def test_server_killed_mid_turn_is_reported_with_its_stderr_tail_and_the_next_prompt_is_answered(run):
    scenario(run, "server_killed_mid_turn")
    results, _, _ = run
    assert results["scenarios"]["server_killed_mid_turn"]["stderrTail"].strip()


def test_a_prompt_sent_while_scrolled_up_in_a_loaded_history_was_answered_out_of_sight(run):
    """The user loaded a session and scrolled up to read it, then sent a prompt: the panel stayed where
    it was, so the answer and the permission card it asked for were drawn far below, out of sight (the
    card only its height: nothing to click). Sending a prompt now follows the end again."""
    scenario(run, "server_killed_mid_turn")
    assert run[0]["scenarios"]["server_killed_mid_turn"]["scrolledAway"], "the panel was not scrolled away before the prompt"


def test_resume_after_kill_9_continues_the_session(run):
    """Issue 30, item 6: after the server was killed (-9) mid-turn, the next prompt went to an empty
    new session while the old transcript stayed on screen. Now the session is resumed: the model's
    request for the next prompt holds the earlier prompt, the killed call is closed (not left
    running), and the panel draws no new-session divider."""
    scenario(run, "server_killed_mid_turn")
    results, _, endpoint = run
    got = results["scenarios"]["server_killed_mid_turn"]
    requests = model_requests_after(endpoint, "Are you there?")
    assert requests, "no model request for the prompt after the crash"
    history = json.dumps(requests[0])
    assert "Wait once more" in history, "the prompt after kill -9 went to a new session (the history is gone)"
    assert got["dividers"] == 0 and got["runningCards"] == 0, got


def test_a_file_with_mixed_line_endings_could_be_neither_edited_nor_undone_in_vscode(run):
    """Newcomer 4, finding 6: VS Code's text model rewrites a mix of CRLF and LF (and lone CRs), so
    every proposal for such a file was stale ("changed on disk since the agent read it", again after
    every re-read) and /undo of it could not take a change back. Now each is proposed on and written
    as the disk's bytes: every other byte (each line break, the BOM) stays exactly as it was."""
    scenario(run, "mixed_line_endings_byte_exact")
    results, workspace, endpoint = run
    got = results["scenarios"]["mixed_line_endings_byte_exact"]
    steps = [(s["file"], s["outcome"], bytes.fromhex(s["bytes"])) for s in got["steps"]]
    edited = MIXED.replace(b"b", b"B")
    assert steps == [
        ("mixed.txt", "applied", edited),  # the edit
        ("mixed.txt", "applied", MIXED),  # /undo
        ("mixed.txt", "applied", edited),  # /redo
        ("cr.txt", "applied", b"x1\rY2\rz3\r"),
        ("mixedopen.txt", "applied", MIXED_OPEN.replace(b"q", b"Q")),  # open in a clean editor
        ("crlfnew.txt", "applied", b"x\r\ny\r\n"),  # created with CRLF lines
        ("mixedopen.txt", "accept-edits", MIXED_OPEN.replace(b"q", b"Q").replace(b"s\n", b"S\n")),
    ], got["steps"]
    assert (workspace / "mixed.txt").read_bytes() == edited
    # the card says how the change is written
    assert "changed on disk byte for byte" in got["steps"][0]["card"], got["steps"][0]
    assert "created on disk with exactly these line breaks" in got["steps"][5]["card"], got["steps"][5]
    # the clean editor of mixedopen.txt reloaded what was written, and is not left with unsaved text
    assert "Q" in (got["shownAfter"] or "") and got["cleanAfter"], got
    for call_id in ("em1", "ec1", "eo1", "eo2", "wn1"):
        told = tool_results(endpoint, call_id)
        assert told and told[0].startswith(("Edited ", "Created ", "Wrote ")) and "changed since" not in told[0], (call_id, told)


def test_latin1_file_open_in_vscode_is_refused_and_its_bytes_never_rewritten_as_u_fffd(run):
    scenario(run, "latin1_refused")
    _, workspace, endpoint = run
    assert (workspace / "latin1.txt").read_bytes() == LATIN1
    read, edit = tool_results(endpoint, "r8")[0], tool_results(endpoint, "e8")[0]
    assert read.startswith("Cannot read latin1.txt: the file is not UTF-8 text (2 invalid bytes, first at offset 3).")
    assert edit.startswith("Cannot edit latin1.txt: the file is not UTF-8 text") and "\ufffd" not in read + edit


def test_session_picker_lists_the_sessions_and_loading_one_replays_its_history(run):
    """…and nothing of the replay looks live (issue 30 item 11, "loaded sessions show chips as live"):
    no spinner, no running card or clock, no working line, no Stop."""
    scenario(run, "session_picker_loads_history")
    results, _, _ = run
    got = results["scenarios"]["session_picker_loads_history"]
    assert {k: got[k] for k in ("state", "spinners", "running", "working", "stop")} == {
        "state": "idle", "spinners": 0, "running": 0, "working": False, "stop": False}, got


def test_the_panel_s_session_list_was_a_select_beside_the_searchable_quickpick(run):
    """The panel offered two ways to pick a session (an HTML <select>, and Agent: Open Session…): now
    one, its session button opening the QuickPick — by keyboard (focus, Enter, type, Enter) — with the
    sessions' titles and when each was last used; the button then names the session loaded."""
    scenario(run, "session_picker_loads_history")
    got = run[0]["scenarios"]["session_picker_loads_history"]
    assert got["selects"] == 0, got
    assert any("Make greet say hi" in r for r in got["listed"]), got
    assert all("today" in r or "yesterday" in r or "-" in r for r in got["listed"]), got  # a date on each
    assert "Make greet say hi" in got["sessionButton"], got


def test_workspace_settings_cannot_choose_the_server_binary(run):
    """The workspace's .vscode/settings.json names another agentServer.path: every scenario ran on
    the user's server, and the workspace's binary never started."""
    results, workspace, _ = run
    assert (workspace / ".vscode" / "settings.json").exists()
    assert results["scenarios"], "no scenario ran"
    assert not (workspace.parent / "trap" / "pwned").exists(), "the workspace's agentServer.path was started"


def test_code_server_and_chromium_process_groups_are_gone(run):
    results, _, _ = run
    for name, pid in results["pids"].items():
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            continue
        pytest.fail(f"the process group of {name} ({pid}) is still alive")


#: The transcript's DOM nodes (elements and text) after the ~200 KB answer with 60 tool calls: every
#: item and chunk far from the viewport is a placeholder of its height. Drawn whole it was 7,590.
LONG_NODES_MAX = 1500


def test_long_answer_with_60_tool_calls_keeps_the_panel_bounded_and_renders_each_block_once(run):
    """Issue 30, item 1 (a long answer froze the panel: the whole message was rendered as markdown on
    every repaint). Structural bounds in CI; the 2 MB timing goals are in bench/."""
    scenario(run, "long_answer_stays_bounded")
    results, _, endpoint = run
    got = results["scenarios"]["long_answer_stays_bounded"]
    assert got["nodes"] <= LONG_NODES_MAX, got
    assert got["toolCards"] == 3 * LONG_STEPS, got
    # every paragraph closed, and none was rendered twice, scrolling back to the top included (a part of a
    # burst far from the end is rendered only once it is scrolled to: newcomer 4 finding 1)
    paragraphs = sum(long_answer_part(k, 10_000).count("Paragraph ") for k in range(LONG_STEPS))
    assert got["mdBlocks"] >= paragraphs, got
    assert got["mdRenders"] <= got["mdBlocks"], got
    assert got["mdRenders"] <= got["mdRendersAfterScroll"] <= got["mdBlocks"], got
    assert got["firstShownAfterScroll"] and got["lastShown"], got


def test_a_two_megabyte_answers_session_replayed_for_half_a_minute_in_vscode(run):
    """Newcomer 4, finding 1: opening a session whose history holds a 2 MB answer trickled for 25–50 s
    (every markdown block rendered, oldest first, before anything after it), and a prompt sent meanwhile
    stayed invisible until the end. Now the prompt's bubble shows at once and the answer's end is drawn
    first (few of its ~27,000 paragraphs rendered when each first shows), the rest when scrolled to; the
    prompt goes after the whole history and is answered below it."""
    scenario(run, "two_megabyte_replay_stays_usable")
    results, _, endpoint = run
    got = results["scenarios"]["two_megabyte_replay_stays_usable"]
    seen = got["seen"]
    # ~27,000 paragraphs: before, each was rendered (oldest first) before anything after the answer was drawn
    assert seen["bubble"]["mdRenders"] - seen["rendersBefore"] < 1000, got  # the prompt shown before the answer was rendered whole
    assert seen["end"]["mdRenders"] - seen["rendersBefore"] < 1000, got  # the answer's end drawn first
    order = got["order"]
    assert 0 <= order["end"] < order["prompt"] < order["answer"] == order["slots"] - 1, got
    assert order["note"] == "", got  # once the replay ended, an ordinary prompt of the session
    assert got["firstShown"], got  # the answer's first line, drawn when scrolled to
    # the model got the prompt with the whole report before it
    requests = model_requests_after(endpoint, REPORT_DURING)
    assert len(requests) == 1 and REPORT_END in json.dumps(requests[0]), requests and len(requests)


def test_keystrokes_right_after_accept_never_garble_the_document(run):
    """Issue 30, item 2 (4 of 12 tries garbled: a disk read was awaited between the text check and
    workspace.applyEdit, and the edit landed on text the user had typed into). 25 tries on one
    document, each changing its own line; the user types `zz` and Enter at the top 0-60 ms after
    Accept. At the end (saved): every keystroke is there and each try's line is either unchanged or
    exactly the proposal — nothing else; a try answered `applied` changed its line, one answered
    `stale` did not, and none is answered `failed` (an edit VS Code dropped after the user typed, while
    answering `true`, is `stale`)."""
    scenario(run, "keystrokes_right_after_accept_never_garble")
    results, workspace, endpoint = run
    tries = results["scenarios"]["keystrokes_right_after_accept_never_garble"]["tries"]
    assert len(tries) == RACE_TRIES
    text = (workspace / RACE).read_text()
    changed = {i for i in range(RACE_TRIES) if f"v{i:02d} = 2\n" in text}
    assert text == "zz\n" * RACE_TRIES + race_text(changed), text  # not garbled
    outcomes = {i: t["outcome"] for i, t in enumerate(tries)}
    assert all(o in ("applied", "stale") for o in outcomes.values()), \
        [(i, o, tool_results(endpoint, f"re{i}")) for i, o in outcomes.items() if o not in ("applied", "stale")]
    assert {i for i, o in outcomes.items() if o == "applied"} <= changed, (outcomes, changed)
    assert not {i for i, o in outcomes.items() if o == "stale"} & changed, (outcomes, changed)


def test_the_panel_shown_first_starts_the_server_before_the_first_prompt(run):
    """Issue 27, item 5: the panel shown at start-up starts the server (initialized, the status bar
    says ready) before any prompt; a window that never shows the panel starts none."""
    scenario(run, "panel_prestarts_the_server")
    results, _, _ = run
    got = results["scenarios"]["panel_prestarts_the_server"]
    assert got["serversBeforePrompt"] == 1, got
    assert got["secondWindow"] == {"extensionActive": True, "panelShown": False, "servers": 0}, got


def test_no_server_is_left_after_the_window_closes(run):
    results, _, _ = run
    assert results["serversLeft"] == [], results["serversLeft"]


def test_shell_command_is_shown_whole_in_the_question(run):
    """Issue 30, item 5: the question showed only the model's description; now the command itself,
    never shortened — the 4,200 spaces as a marker, the terminal escape escaped, the tail visible."""
    scenario(run, "shell_permission_allow_once")
    results, _, _ = run
    shown = results["scenarios"]["shell_permission_allow_once"]["commandShown"]
    assert shown == "echo allowed > perm.txt⟨4,200 spaces⟩# \\x1b[2K tail", shown


def test_stale_said_at_once_when_the_user_types_into_a_document_under_review(run):
    """Issue 30, item 7: the card said nothing until Accept; now it turns stale as the user types and
    offers to ask the agent again (answered stale: the model reads the file again)."""
    scenario(run, "stale_proposal")
    results, _, _ = run
    assert results["scenarios"]["stale_proposal"]["staleAtOnce"] is True


def test_symlinked_workspace_reads_the_unsaved_buffer_and_the_edit_lands_in_it(run):
    """Issue 30, item 3: with dev -> share opened as dev/proj, the server names the real path
    (share/proj/linked.py). The read returned the disk text, not the unsaved buffer, and the edit went
    into a hidden second document that was saved. Now the read is the user's buffer, the edit lands in
    it (still unsaved: the user's tab holds both texts) and the disk is untouched."""
    scenario(run, "symlinked_workspace_one_document")
    results, workspace, endpoint = run
    assert LINKED_TYPED in tool_results(endpoint, "r9")[0], "the read did not see the unsaved buffer"
    assert "linked.py" in tool_results(endpoint, "e9")[0]
    assert (workspace.parent / "share" / "proj" / "linked.py").read_text() == LINKED, "written through a second document"


def test_multi_root_edit_in_the_second_folder_is_reviewed_and_lands(run):
    """Issue 30, item 4: only the first folder was sent and an edit to the second was refused as
    outside the workspace. Now the edit is proposed, accepted in the diff and saved."""
    scenario(run, "multi_root_edit_lands")
    _, workspace, endpoint = run
    assert (workspace.parent / "second" / "second.py").read_text() == SECOND.replace("limit = 1", "limit = 2")
    told = tool_results(endpoint, "e10")[0]
    assert "outside" not in told, told


def test_format_on_save_is_told_to_the_model(run):
    """Issue 30, item 8: a save participant (here files.trimTrailingWhitespace) changed the text at
    save, after Accept, and the model was told the text it proposed. Now the tool result says the
    editor changed it and shows the saved text (the trailing spaces gone, as on disk)."""
    scenario(run, "format_on_save_told_to_the_model")
    _, workspace, endpoint = run
    assert (workspace / "fmt.ini").read_text() == FMT_PROPOSED.replace("   \n", "\n")
    told = tool_results(endpoint, "w11")[0]
    assert "The editor changed the text" in told and "+key = 2\n" in told, told


def test_a_proposal_changed_by_format_on_save_said_applied_as_proposed(run):
    """Newcomer 5, finding 0.1: the save after Accept ran the user's save participants (format-on-save,
    here files.trimTrailingWhitespace) and changed the text beyond the proposal; the card said only
    "Applied". Now it says the editor's save changed more than the proposal, counted on the saved text."""
    scenario(run, "format_on_save_told_to_the_model")
    results, workspace, _ = run
    outcome = results["scenarios"]["format_on_save_told_to_the_model"]["outcome"]
    assert (workspace / "fmt.ini").read_text() == FMT_PROPOSED.replace("   \n", "\n")
    assert outcome.startswith("Applied: the editor's save (format-on-save or another save participant) "
                              "changed 1 more line than the proposal (+1 −1)"), outcome


def test_undo_said_restored_while_format_on_save_had_rewritten_the_file(run):
    """Newcomer 5, finding 0: with format-on-save for JSON, accepting a one-line change of cfg.json
    pretty-printed the whole file while the card and the Changes box said "+1 −1"; /undo's restore
    went through the same save (formatted again) and the chat said "restored" although the disk did
    not hold the checkpoint's bytes. Now the card and the Changes box count what is on disk, and /undo
    says the editor's save changed the restore."""
    scenario(run, "json_format_on_save_and_undo")
    results, workspace, _ = run
    got = results["scenarios"]["json_format_on_save_and_undo"]
    on_disk = (workspace / "cfg.json").read_bytes()
    assert on_disk != CFG_JSON and b'"b": 2' in on_disk and on_disk.count(b"\n") > 3, on_disk  # formatted twice
    assert "the editor's save (format-on-save or another save participant) changed" in got["outcome"], got
    counts = re.search(r"cfg\.json[^+]*\+(\d+)\s*−(\d+)", got["changes"])  # "+9 −1" as drawn: two spans
    assert counts and int(counts[1]) > 1, got  # the formatted lines, not the proposal's one
    assert "cfg.json: restored." not in got["undo"], got
    assert "cfg.json: restored (then the editor's save changed it" in got["undo"], got


def test_undo_through_format_on_save_said_nothing_was_undone_and_stuck_on_the_turn(run):
    """Newcomer 6, finding 2: with format-on-save, /undo → Accept All took the agent's change back on
    disk (reformatted), yet the panel said "not restored as it was … Nothing was undone: turn 2 is
    still the one /undo takes back", and every later /undo looped on that turn. The restore, applied
    exactly (VS Code says the text's hash before its save: beforeSave), counts: said restored with the
    save's part, and the next /undo goes past the turn."""
    scenario(run, "json_format_on_save_and_undo")
    results, workspace, _ = run
    got = results["scenarios"]["json_format_on_save_and_undo"]
    assert json.loads((workspace / "cfg.json").read_bytes()) == json.loads(CFG_JSON), got  # the agent's b: 3 gone
    assert "only by what that save changed" in got["undo"], got
    assert "Nothing was undone" not in got["undo"] and "not restored as it was" not in got["undo"], got
    assert got["next"].startswith("Nothing to undo: every agent turn that changed files is undone"), got


def test_session_quickpick_lists_titles_and_dates_searches_and_deletes(run):
    """Issue 30, item 6: the session picker was a plain <select>; now Agent: Open Session… is a
    QuickPick with each session's title and when it was last used, narrowed by what is typed, and
    its trash button deletes a session (session/delete) after a confirmation."""
    scenario(run, "session_quickpick_searches_and_deletes")
    results, _, _ = run
    got = results["scenarios"]["session_quickpick_searches_and_deletes"]
    assert any("Make greet say hi" in r for r in got["listed"]) and len(got["listed"]) >= 2, got
    assert all("today" in r or "yesterday" in r or "-" in r for r in got["listed"]), got  # a date on each
    assert got["found"] and all("greet" in r.lower() for r in got["found"]), got
    assert not any("Make greet say hi" in r for r in got["after"]) and got["after"], got


def test_the_undo_three_button_card_had_no_code_server_test(run):
    """/undo of a file the agent changed (line 2) and the user changed too (a line typed at its end and
    saved in the editor) asks with three buttons, "Undo the agent's change, keep the rest"
    (agents_change_only) first; chosen in the real panel, the file (a BOM, CRLF endings) holds the
    user's line and not the agent's change, byte for byte, and its document is saved."""
    scenario(run, "undo_takes_back_only_the_agents_change")
    results, workspace, _ = run
    got = results["scenarios"]["undo_takes_back_only_the_agents_change"]
    assert got["options"] == [["agents_change_only", "Undo the agent's change, keep the rest"],
                              ["allow_once", "Take the checkpoint"],
                              ["reject_once", "Keep the file as it is"]], got
    assert (workspace / MERGE).read_bytes() == MERGE_BYTES + MERGE_TYPED.encode() + b"\r\n"
    assert got["dirty"] is False, got
    assert "line 2 by the agent" not in got["editor"] and MERGE_TYPED in got["editor"], got


def test_a_permission_question_that_arrived_while_the_user_had_scrolled_up_was_drawn_out_of_sight(run):
    """The user scrolled up to read the answer while a command ran; the next permission question came
    and was drawn far below (kept as its height alone), nothing on screen saying the agent waited. Now
    the reader's place is kept and a bar under the transcript names the question; clicking it brings
    the card into view, drawn, its first button focused."""
    scenario(run, "question_arrives_while_scrolled_up")
    results, workspace, _ = run
    got = results["scenarios"]["question_arrives_while_scrolled_up"]
    assert got["scrolledAway"] > 3000, got  # the long answer above: the question came far below
    arrived = got["arrived"]
    assert not arrived["cardInView"] and arrived["scrollTop"] == 0, got  # the reader was not moved
    assert arrived["bar"] and "Write question.txt" in arrived["bar"], got
    followed = got["followed"]
    assert followed["cardInView"] and followed["cardDrawn"] and followed["allowInView"] and followed["allowFocused"], got
    assert got["barAfter"] is False, got  # answered: nothing waits
    assert (workspace / "question.txt").read_text() == "second\n"


def test_restart_server_resumes_the_session(run):
    """Issue 30, item 6: Agent: Restart Server continued in an empty new session while the old
    transcript stayed on screen. Now the session is resumed: the model's request for the next prompt
    holds the prompts before the restart, and no new-session divider is drawn."""
    scenario(run, "restart_server_resumes_the_session")
    results, _, endpoint = run
    requests = model_requests_after(endpoint, "Still there after the restart?")
    assert requests and "Comment the area" in json.dumps(requests[0]), "a new session after Restart Server"
    assert results["scenarios"]["restart_server_resumes_the_session"]["dividers"] == 0


def test_window_reload_reopens_the_session(run):
    """Issue 30, item 6: after a window reload the panel was empty and the next prompt started a new
    session. Now the session the window had open is loaded again: its prompts and answers are shown."""
    scenario(run, "window_reload_reopens_the_session")
    results, _, _ = run
    assert results["scenarios"]["window_reload_reopens_the_session"]["dividers"] == 0


def test_a_window_reload_while_a_proposal_waited_restored_a_diff_tab_that_could_not_be_opened(run):
    """Newcomer finding F4: a window reloaded while a proposal waited (its turn is cancelled with the
    old extension host) came back with an "Edit second.py (proposal)" tab that VS Code could not open
    (its virtual file lived in the old host) — and kept it across reloads and in a second window. Now
    no proposal tab is left and no editor says it could not be opened; nothing was applied."""
    scenario(run, "window_reload_reopens_the_session")
    results, workspace, _ = run
    got = results["scenarios"]["window_reload_reopens_the_session"]
    assert got["proposalTabsBefore"] == 1, got  # the proposal was on screen when the window reloaded
    assert got["proposalTabs"] == 0 and got["brokenEditors"] == 0, got
    assert (workspace.parent / "second" / "second.py").read_text() == SECOND.replace("limit = 1", "limit = 2")


def test_open_settings_opened_the_workspace_tab_where_the_endpoint_setting_is_not(run):
    """Newcomer finding F8: the first-run page's Open Settings opened the Workspace tab filtered to
    "agentServer", where only Mode appears (path, baseUrl and model are machine-scoped: user settings
    only). Now it opens the user's settings (the Remote tab in a remote window) filtered to the
    extension (@ext:), and the endpoint setting is there with the value the server uses."""
    scenario(run, "first_run_empty_state")
    results, _, endpoint = run
    got = results["scenarios"]["first_run_empty_state"]["settingsShown"]
    assert got["endpointShown"] and got["endpointValue"] == endpoint.base_url, got
    assert "@ext:agent-server.agent-server-vscode" in got["query"], got


def test_sign_in_then_ctrl_c_in_the_login_terminal_gave_an_error_toast(run):
    """Newcomer finding F11: Sign in, then Ctrl-C in the login terminal: VS Code showed the error toast
    "The terminal process … terminated with exit code: 1". Now no such toast; an information message
    says nothing was signed in, and the empty panel keeps its set-up card (newcomer 3, finding 11)."""
    scenario(run, "first_run_empty_state")
    results, _, _ = run
    got = results["scenarios"]["first_run_empty_state"]["loginCancelled"]
    assert got["loginRan"] and got["exitToasts"] == 0, got
    assert got["said"] and "Not signed in" in got["said"] and "nothing was stored" in got["said"], got
    assert got["setupKept"], got


def test_first_run_empty_state_shows_the_endpoint_and_model_and_the_ways_forward(run):
    """Issue 30, item 9 (acceptance): a first run showed an empty panel; messages pointed to
    `agent-server login` and environment variables. Now the page says which endpoint and model the
    server will use — here the offline endpoint, said to be a script, not a model — and offers Set
    API Key, Sign in (agent-server login in a terminal), Open Settings and Show Server Log."""
    scenario(run, "first_run_empty_state")
    results, _, endpoint = run
    got = results["scenarios"]["first_run_empty_state"]
    assert got["facts"]["endpoint"] == endpoint.base_url, got
    assert got["facts"]["offline"] is True and "offline script" in got["facts"]["model"], got
    assert got["facts"]["buttons"] == ["Set API Key", "Sign in", "Open Settings", "Show Server Log"], got
    assert (got["log"], got["settings"], got["keyBox"], got["terminal"]) == (True, True, True, True), got


def test_the_first_run_page_did_not_find_out_whether_the_endpoint_answers(run):
    """The first-run page ran `--check-config` without `--probe`: a wrong base URL was found out only by
    the first prompt. Now the server asks its endpoint's /models with its key (as its first request
    would) and the page says so: here the offline endpoint answers. (A wrong one: vitest
    the_first_run_page_did_not_find_out_a_wrong_endpoint, the real server against a closed port.)"""
    scenario(run, "first_run_empty_state")
    results, _, endpoint = run
    got = results["scenarios"]["first_run_empty_state"]
    assert (got["facts"]["reach"] or "").startswith("Endpoint check: answers — The endpoint accepted the key"), got
    assert any(r.method == "GET" and r.path.endswith("/models") and r.headers.get("authorization") == "Bearer offline-test-key"
               for r in endpoint.requests), [(r.method, r.path) for r in endpoint.requests][:10]


def test_mode_and_model_pickers_were_missing_before_the_first_prompt(run):
    """Issue 30, item 11: the pickers came only with a session, so the mode and model could not be
    chosen before the first prompt. The first-run page shows them (what a new session starts with);
    a mode picked on the empty panel after New is the mode of the session the first prompt makes:
    the model's request says it (the system prompt's "Mode: read-only")."""
    scenario(run, "first_run_empty_state")
    scenario(run, "auth_error_offers_the_way_forward")
    results, _, endpoint = run
    pickers = results["scenarios"]["first_run_empty_state"]["facts"]["pickers"]
    assert "mode=workspace-write" in pickers and any(p.startswith("model=") for p in pickers), pickers
    got = results["scenarios"]["auth_error_offers_the_way_forward"]
    assert got["modeBeforePrompt"] and got["modeAfter"] == "read-only", got
    asked = [r.json() for r in chat_requests(endpoint) if "Hello?" in json.dumps(r.json()["messages"])]
    assert asked, "the prompt never reached the endpoint"
    system = "".join(m["content"] for m in asked[0]["messages"] if m["role"] == "system" and isinstance(m["content"], str))
    assert "- Mode: read-only" in system, system[-2000:]


def test_the_panel_drew_icons_as_characters_and_emoji_not_codicons(run):
    """Issue 30, item 10 (VS Code-native widgets): the panel's buttons and cards drew ✓ ✗ ▾ × 🖼 as
    icons. Now VS Code's codicons (@vscode/codicons, packaged in the .vsix): the font loaded in the
    webview under its Content-Security-Policy, whose font-src is the extension's resource origin alone,
    and the setup buttons' glyphs drawn with it."""
    scenario(run, "first_run_empty_state")
    results, _, _ = run
    got = results["scenarios"]["first_run_empty_state"]["codicons"]
    assert got["fontStatus"] == "loaded" and "codicon" in got["glyphFont"], got
    assert got["glyphWidth"] > 0 and got["glyphContent"] not in ("", "none", "normal"), got
    # font-src is the webview's resource origin (webview.cspSource, as style-src), nothing broader
    assert got["fontSrc"] and got["fontSrc"] == got["styleSrc"] and got["cssFromExtension"], got
    assert not {"*", "data:", "http:", "https:", "blob:"} & set(got["fontSrc"]), got
    assert not got["emoji"], got


def test_401_from_the_endpoint_offers_set_api_key_and_sign_in_in_the_panel(run):
    """Newcomer finding 2 / issue 30 item 9: a 401 showed only the provider's "Incorrect API key
    provided" and no way forward in the panel; its error card now has the same buttons."""
    scenario(run, "auth_error_offers_the_way_forward")
    results, _, _ = run
    got = results["scenarios"]["auth_error_offers_the_way_forward"]
    assert got["shown"] and "agent-server login" in got["text"], got
    assert got["buttons"] == ["Set API Key", "Sign in", "Open Settings", "Show Server Log"], got


def test_set_api_key_from_a_401_left_the_session_failing_with_the_same_401(run):
    """Newcomer 6 finding 6: the 401's own Set API Key stored the key "from the next new session": the
    session showing the error failed again with the same 401 and the same button, and the notice pointed
    to New (its conversation lost). The key applies at once: agent-server is restarted with it and the
    session resumed; the prompt sent again in it reaches the model with the new key."""
    scenario(run, "auth_error_offers_the_way_forward")
    results, _, endpoint = run
    got = results["scenarios"]["auth_error_offers_the_way_forward"]["keyFix"]
    assert got["resumed"] and "resumed" in got["resumed"] and got["answered"], got
    assert got["newSessionOnly"] == 0, got
    retried = [r for r in chat_requests(endpoint) if KEY_RETRY in json.dumps(r.json()["messages"])]
    assert retried and retried[0].headers.get("authorization") == f"Bearer {NEW_KEY}", retried

def test_execute_card_shows_the_command_its_live_output_and_elapsed_time(run):
    """Issue 30, item 5: a card said only the model's own description ("Run the tests"). Now the
    command (monospace), the output while the command runs (the terminal convention), the elapsed
    time, and status words (Running, Done) instead of IN_PROGRESS."""
    scenario(run, "execute_cards_and_daily_features")
    results, _, _ = run
    got = results["scenarios"]["execute_cards_and_daily_features"]["execute"]
    assert got["status"] == "in_progress" and got["statusWord"] == "Running" and got["elapsedRunning"], got
    assert got["command"] == EXEC_COMMAND, got
    assert "live-one" in got["terminal"] and "finished" in got["terminal"], got
    assert got["elapsed"].endswith(" s") and got["statusDone"] == "Done", got


def test_tool_card_opens_its_file_at_its_location(run):
    """Issue 30, item 5: a read card of app.py from line 3 opens app.py with the cursor on line 3."""
    scenario(run, "execute_cards_and_daily_features")
    results, _, _ = run
    assert "Ln 3," in results["scenarios"]["execute_cards_and_daily_features"]["cursor"]


def test_changes_view_slash_completion_undo_and_a_file_mention(run):
    """Issue 30, item 10: the turn's changes per file with their diff and "Undo this turn" (/undo
    removed the created file), slash-command completion from available_commands_update, the Undo
    button, and an @-mentioned file sent to the model as an embedded resource."""
    scenario(run, "execute_cards_and_daily_features")
    results, workspace, endpoint = run
    got = results["scenarios"]["execute_cards_and_daily_features"]
    assert NEW_FILE in got["changeRow"] and "+" in got["changeRow"] and got["diff"], got
    # newcomer F1a: the box listed the file while its proposal still waited (nothing had changed)
    assert got["rowWhilePending"] == 0, got
    assert "undo" in got["offered"] and got["completed"] == "/undo ", got
    assert got["undoButton"] and got["chipsLeft"] == 0, got
    assert not (workspace / NEW_FILE).exists()  # Undo this turn took the new file back
    assert got["undoneShown"] == "true", got  # and the Changes box says so
    last = chat_requests(endpoint)
    sent = [m for r in last for m in r.json()["messages"] if m["role"] == "user" and "What is in it?" in json.dumps(m)]
    assert sent and "two.py" in json.dumps(sent[-1]) and "c = 3" in json.dumps(sent[-1]), sent


def test_a_long_token_in_an_answer_ran_past_the_panel_edge(run):
    """Issue 30, item 11 ("long tokens wrap"): a word wider than the panel (a path, a hash) must wrap,
    not push the transcript into a horizontal scroll or run out of its card."""
    scenario(run, "execute_cards_and_daily_features")
    results, _, _ = run
    assert results["scenarios"]["execute_cards_and_daily_features"]["overflow"] == {"transcript": 0, "items": 0}


def test_a_created_file_opens_on_accept(run):
    """Issue 30, item 11: accepting a proposal that creates a file left it unopened."""
    scenario(run, "execute_cards_and_daily_features")
    results, _, _ = run
    assert results["scenarios"]["execute_cards_and_daily_features"]["createdOpened"] is True


def test_shortcuts_and_quickpick_pickers_with_full_access_confirmed(run):
    """Issue 30, items 10 and 11: New Session (Ctrl+Alt+N) and Accept (Ctrl+Alt+Enter in the
    proposal's diff) from the keyboard; the mode and model pickers are QuickPicks, and choosing full
    access asks first (cancelled: the mode stays)."""
    scenario(run, "execute_cards_and_daily_features")
    results, _, _ = run
    got = results["scenarios"]["execute_cards_and_daily_features"]
    assert got["shortcuts"] == {"newSession": True, "accept": True}, got
    assert got["pickers"] == {"modelQuickPick": True, "fullAccessConfirm": True, "modeAfter": "workspace-write"}, got


def test_the_diff_breadcrumb_showed_the_proposals_internal_uri(run):
    """Issue 30, item 11: the proposal's diff showed its internal URI in the breadcrumb (p1 › 0 ›
    new › app.py); now the file's workspace-relative path (with the folder's name in a multi-root
    workspace) and a title naming the file."""
    scenario(run, "accept_in_unsaved_document")
    scenario(run, "multi_root_edit_lands")
    results, _, _ = run
    for name, path in (("accept_in_unsaved_document", ["app.py"]), ("multi_root_edit_lands", ["second", "second.py"])):
        shown = results["scenarios"][name]["diffShown"]
        assert shown["crumbs"][:len(path)] == path, (name, shown)
        assert "(proposal)" in shown["tab"] and path[-1] in shown["tab"], (name, shown)


def test_restart_and_kill_notices_said_what_actually_happened(run):
    """Issue 30, item 11: after Restart Server the panel said "this session goes on" before the
    resume was answered; after a kill -9 it said "the session is resumed when the server is back"
    and never whether it was; a window reload said nothing. Now each says what happened, once it did."""
    scenario(run, "server_killed_mid_turn")
    scenario(run, "restart_server_resumes_the_session")
    scenario(run, "window_reload_reopens_the_session")
    results, _, _ = run
    exited, resumed = results["scenarios"]["server_killed_mid_turn"]["said"]
    assert exited.startswith("agent-server exited (killed by SIGKILL). It is being started again; session "), exited
    assert exited.endswith(" is resumed once it is back."), exited
    assert resumed.startswith("agent-server was started again after it exited: session ") and "resumed" in resumed, resumed
    restarted = results["scenarios"]["restart_server_resumes_the_session"]["said"]
    assert restarted.startswith("agent-server was restarted (Agent: Restart Server): session ") and " resumed" in restarted, restarted
    reopened = results["scenarios"]["window_reload_reopens_the_session"]["said"]
    assert reopened and reopened.startswith("The window was reloaded: session ") and "reopened" in reopened, reopened


def test_the_automatic_resume_of_a_session_another_process_holds_offers_the_take_over(run):
    """After Restart Server (or a crash) the panel resumes the session by itself; when another
    agent-server process held it (SESSION_BUSY), it said only that a new session starts. Now it offers
    Take over here / Open a copy / Cancel as the picker does, and Take over here brings it back (the
    other process released it) — the next scenario's reload shows the same session."""
    scenario(run, "restart_server_resumes_the_session")
    results, _, _ = run
    got = results["scenarios"]["restart_server_resumes_the_session"]["takeOver"]
    assert got["buttons"] == ["Take over here", "Open a copy", "Cancel"], got
    assert got["released"] is True, got


def test_typing_on_another_line_while_a_proposal_waited_made_it_stale(run):
    """Newcomer 4, finding 7: ` USER` typed at the end of line 1 (the agent's change is on line 2) while
    the proposal waited made it stale: Accept All refused. Now the typing (and a line typed above) is
    merged: the diff follows it, Accept All applies the change on top of it — the user's text as typed,
    the BOM, CRLF and the missing final newline kept — the document stays unsaved (the user's typing is
    not saved for them), and the model is told the file holds text it has not seen."""
    scenario(run, "typing_on_another_line_while_a_proposal_waited")
    results, workspace, endpoint = run
    got = results["scenarios"]["typing_on_another_line_while_a_proposal_waited"]
    assert (got["staleWhileTyping"], got["outcome"], got["dirty"]) == (False, "applied", True), got
    assert bytes.fromhex(got["diskBeforeSave"]) == TYPING_BYTES  # not saved for the user
    assert bytes.fromhex(got["saved"]) == b"\xef\xbb\xbfzero\r\none USER\r\nTWO\r\nmore\r\nthree"
    told = tool_results(endpoint, "mg2")[0]
    assert "the user edited other lines of typing.txt" in told and "Read it again before you edit it" in told, told


def test_typing_next_to_a_waiting_proposals_hunk_still_makes_it_stale(run):
    """The negative of finding 7: typing at the end of the line the agent changes is stale at once, and
    Accept All is refused (answered stale, the model told to read the file again)."""
    scenario(run, "typing_on_another_line_while_a_proposal_waited")
    results, workspace, endpoint = run
    got = results["scenarios"]["typing_on_another_line_while_a_proposal_waited"]
    assert (got["nextStaleAtOnce"], got["staleSaysEditor"], got["nextOutcome"]) == (True, True, "stale"), got
    assert bytes.fromhex(got["savedAfterNext"]) == b"\xef\xbb\xbfzero\r\none USER\r\nTWO\r\nmore\r\nthreeX"
    told = tool_results(endpoint, "mg4")[0]
    assert "changed in the editor since you read it" in told, told


def test_the_unusual_line_terminators_dialog_showed_twice_for_one_file(run):
    """Newcomer 4 (finding 6's aside): a proposal for a file holding U+2028 made VS Code ask twice over
    the panel whether to remove its "unusual line terminators" (once for the file's document on the
    diff's left, once for the editable proposed side). The diff now shows both sides read-only: never
    asked, and the accepted edit keeps every other byte (the U+2028, the BOM, the final newline)."""
    scenario(run, "unusual_line_terminators_asked_once_at_most")
    results, workspace, _ = run
    got = results["scenarios"]["unusual_line_terminators_asked_once_at_most"]
    assert (got["dialogs"], got["outcome"]) == (0, "applied"), got
    assert bytes.fromhex(got["saved"]) == UNUSUAL_BYTES.replace(b"second", b"SECOND")
    assert (workspace / UNUSUAL).read_bytes() == UNUSUAL_BYTES.replace(b"second", b"SECOND")


def test_a_question_of_session_a_was_posted_into_session_b_s_transcript_and_answerable_there(run):
    """While the panel showed session B (New, during A's running turn), A's next permission question was
    drawn into B's transcript and answered there; Stop then cancelled only B. Now B's transcript shows
    no question, a row under it says A waits; its "Go to it" opens A, where the question is live (Stop
    offered: A's turn runs) and answered: the command ran in A's turn."""
    scenario(run, "question_of_another_session_stays_with_it")
    results, workspace, _ = run
    got = results["scenarios"]["question_of_another_session_stays_with_it"]
    assert got["cardsInB"] == 0, got
    assert "waits for your answer: Write elsewhere.txt" in got["rowText"] and "Go to it" in got["rowText"], got
    assert (got["stopInA"], got["rowAfter"]) == (1, 0), got
    assert (workspace / "elsewhere.txt").read_text() == "second\n"


def test_saving_after_undo_restored_the_disk_under_unsaved_text_showed_the_file_is_newer_dialog(run):
    """The user's unsaved line in an open file; the agent's command changed the file on disk (another
    size); /undo took the checkpoint on disk (the buffer kept the unsaved text). Ctrl+S must write the
    user's text with no "The content of the file is newer" (Compare / Overwrite): nothing lost, nothing
    asked. (Reported as left for planning after Neovim's fix; code-server 4.139.1 does not show it here:
    VS Code's save conflict needs a newer mtime AND another size than the one its document was read
    with, and the restore put back exactly those bytes. The runner's check of the notification was seen
    to catch it: a write of another size to the file after the /undo made it show.)"""
    scenario(run, "saving_after_undo_restored_the_disk_under_unsaved_text")
    results, workspace, _ = run
    got = results["scenarios"]["saving_after_undo_restored_the_disk_under_unsaved_text"]
    assert got["afterCommand"] == UNDO_SAVE_TEXT.replace("three", "THREE-AND-MORE"), got
    assert got["afterUndo"] == UNDO_SAVE_TEXT, got
    assert "on disk; the editor's buffer keeps your unsaved changes" in got["undoSays"], got
    assert got["dirtyBeforeSave"], got
    assert (got["conflict"], got["clean"]) == ([], True), got
    assert got["saved"] == UNDO_SAVE_TYPED + UNDO_SAVE_TEXT, got
    assert (workspace / UNDO_SAVE).read_text() == UNDO_SAVE_TYPED + UNDO_SAVE_TEXT


def test_a_proposal_accepted_from_its_diff_tab_after_switching_sessions_showed_its_card_in_the_other_session(run):
    """Newcomer 5, finding 10: session A's proposal accepted from its still-open diff tab while the panel
    showed session B put its card into B's transcript (next to B's "Undo this turn"). It goes to A only:
    B shows nothing of it; A shows it applied."""
    scenario(run, "a_proposal_accepted_from_its_diff_tab_after_switching_sessions")
    results, workspace, _ = run
    got = results["scenarios"]["a_proposal_accepted_from_its_diff_tab_after_switching_sessions"]
    assert "Edit" in got["rowWhileWaiting"] and F10 in got["rowWhileWaiting"], got
    assert got["inB"]["cards"] == 0, got
    assert any(c.startswith("completed:") and f"Edit {F10}" in c for c in got["inA"]), got
    assert (workspace / F10).read_text() == "a\nB\nc\n"


def test_a_proposal_of_a_session_not_shown_opened_its_diff_over_the_users_work(run):
    """A proposal of session A that comes while the panel shows session B opened its diff tab in front of
    what the user works on in B (and could be accepted there with nothing of A's conversation in sight).
    Decided: it opens no tab; B's panel says A waits ("Go to it"), which shows A and opens its diff."""
    scenario(run, "a_proposal_accepted_from_its_diff_tab_after_switching_sessions")
    results, workspace, _ = run
    got = results["scenarios"]["a_proposal_accepted_from_its_diff_tab_after_switching_sessions"]
    assert got["tabsWhileNotShown"] == [], got
    assert any(F10_NEXT in t for t in got["tabsAfterGoTo"]), got
    assert got["finalA"][-1] == "applied", got
    assert (workspace / F10_NEXT).read_text() == "a\nB\nc\n"


def test_a_mode_only_change_showed_plus_0_minus_0_in_the_changes_box(run):
    """A shell call's `chmod 600` (no line changed) showed "+0 −0" in the Changes box: the panel ignored
    changedFiles' `modes`. Now the row says the mode change (644 → 600) and no line counts; a file whose
    lines and mode changed shows both."""
    scenario(run, "a_mode_only_change_showed_plus_0_minus_0")
    results, workspace, _ = run
    rows = results["scenarios"]["a_mode_only_change_showed_plus_0_minus_0"]["rows"]
    assert oct((workspace / MODE_ONLY).stat().st_mode & 0o777) == "0o600"
    assert "644 → 600" in rows[MODE_ONLY] and "+0" not in rows[MODE_ONLY], rows
    assert "+1" in rows[MODE_BOTH] and "−0" in rows[MODE_BOTH] and "644 → 755" in rows[MODE_BOTH], rows


def test_the_format_on_save_difference_could_not_be_seen(run):
    """The card said "the editor's save … changed N more lines than the proposal" with no way to see what
    the save changed. Its "Show What the Save Changed" opens a diff: the proposal as accepted (one line)
    ↔ the file as saved (pretty-printed by the workspace's JSON format-on-save)."""
    scenario(run, "the_format_on_save_difference_could_not_be_seen")
    results, workspace, _ = run
    got = results["scenarios"]["the_format_on_save_difference_could_not_be_seen"]
    assert "more lines than the proposal" in got["outcome"], got
    assert got["hasShow"], got
    assert got["saveDiff"]["original"] == '{"a":1,"b":3,"c":[1,2,3]}', got
    assert '"b": 3,' in got["saveDiff"]["modified"] and got["saveDiff"]["modified"].count("\n") >= 8, got
    assert got["disk"] == (workspace / FMT_JSON).read_text() and got["disk"].count("\n") >= 9


def test_the_changes_box_diff_showed_the_proposals_text_not_the_disk(run):
    """The Changes box's file opened a diff of the proposal's texts (the one line proposed) while the disk
    held the formatter's pretty-printed file. Its right side is what is on disk now."""
    scenario(run, "the_format_on_save_difference_could_not_be_seen")
    results, _, _ = run
    got = results["scenarios"]["the_format_on_save_difference_could_not_be_seen"]
    assert got["changesDiff"]["original"] == CFG_JSON.decode(), got
    assert '"b": 3,' in got["changesDiff"]["modified"], got
    assert got["changesDiff"]["modified"].count("\n") >= 8, got


def test_the_session_picker_did_not_flag_a_session_waiting_for_an_answer(run):
    """Newcomer 5, finding 7: session A's permission question waited while the user was in another
    session; the session picker listed A like any other. Now A's row (only it) says it waits for your
    answer and what it asks; picked, A shows the question, answered: the command ran."""
    scenario(run, "the_session_picker_did_not_flag_a_session_waiting_for_an_answer")
    results, workspace, _ = run
    got = results["scenarios"]["the_session_picker_did_not_flag_a_session_waiting_for_an_answer"]
    flagged = [row for row in got["listed"] if "waits for your answer" in row]
    assert len(flagged) == 1 and "Write picked.txt" in flagged[0], got
    assert got["answered"], got
    assert (workspace / "picked.txt").read_text() == "picked\n"


def test_a_replay_of_hundreds_of_cards_was_drawn_in_one_task(run):
    """A session/load replay of hundreds of cards arrives in a few batches; a paint made all of a batch's
    slots at once (~180 for 900 cards: 150–250 ms of one task, bench/README.md). Now a paint makes at most
    48 new slots, the newest first, the rest in the next frames: a session of 300 read cards (made by
    `agent-server run` before the window opened) replayed adds them over several tasks, every one in the end."""
    scenario(run, "a_replay_of_hundreds_of_cards_was_drawn_in_one_task")
    results, _, _ = run
    got = results["scenarios"]["a_replay_of_hundreds_of_cards_was_drawn_in_one_task"]
    assert got["tools"] == CARDS_STEPS * 3, got
    assert got["slotsAdded"] >= got["slots"] >= CARDS_STEPS * 4, got
    assert got["mostSlotsInOneTask"] <= 48, got
