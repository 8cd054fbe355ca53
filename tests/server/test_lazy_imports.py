"""What the server's modules leave unloaded until it is used: a prompt sent right after
``session/new`` (and a ``session/load``) waits for every import the server makes first, so what
neither needs loads with its own feature (bench/README.md, start-up). Each test names the module
and the feature it waits for; a subprocess imports what ``serve_stdio`` imports and looks."""

import json
import subprocess
import sys

import pytest

SERVER = r"""
import json, sys
import agent_server.config.load, agent_server.server.acp.server, agent_server.server.rpc.stdio
print(json.dumps(sorted(sys.modules)))
"""


@pytest.fixture(scope="module")
def loaded() -> set[str]:
    out = subprocess.run([sys.executable, "-c", SERVER], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_server_import_does_not_load_checkpoints_planning(loaded):  # /undo, /redo, /checkpoints
    assert "agent_server.checkpoints.plan" not in loaded


def test_server_import_does_not_load_the_shadow_repository(loaded):  # the first shell call in a git workspace
    assert "agent_server.checkpoints.shadow" not in loaded


def test_server_import_does_not_load_session_fork(loaded):  # session/fork
    assert "agent_server.session.fork" not in loaded


def test_server_import_does_not_load_the_sandbox_wrapper_or_launcher(loaded):  # the first confined command
    assert "agent_server.policy.sandbox.sandbox_exec" not in loaded
    assert "agent_server.policy.sandbox.shell_spawn" not in loaded


def test_server_import_does_not_load_the_shell_command_analysis(loaded):  # the first bash call's policy check
    assert "agent_server.policy.shell" not in loaded


def test_server_import_does_not_load_difflib_or_shlex(loaded):  # an edit's diff, a read's rare hints
    assert "difflib" not in loaded
    assert "shlex" not in loaded


def test_server_import_does_not_load_the_lsp_front_end_or_mcp(loaded):
    assert not {m for m in loaded if m.startswith(("agent_server.server.lsp", "agent_server.tools.mcp",
                                                   "pygls", "mcp"))}
