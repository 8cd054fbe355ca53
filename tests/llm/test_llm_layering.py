"""The llm layer imports nothing else of agent_server, and importing its types stays cheap
(httpx is loaded only when ChatClient is first used)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agent_server.llm

LLM_DIR = Path(agent_server.llm.__file__).parent


def test_llm_imports_nothing_else_of_agent_server():
    for path in LLM_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1, f"{path.name} imports outside agent_server.llm"
                assert not (node.module or "").startswith("agent_server"), path.name
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("agent_server") for a in node.names), path.name


def test_types_import_without_httpx_and_chat_client_loads_it_lazily():
    code = ("import sys, agent_server.llm as l; assert 'httpx' not in sys.modules; "
            "l.LLMError, l.StreamAssembler, l.encode_body; assert 'httpx' not in sys.modules; "
            "l.ChatClient; assert 'httpx' in sys.modules; "
            "from agent_server.llm import ChatClient; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
