"""Start-up: ``initialize`` is answered before the heavy modules load (DESIGN.md §10)."""

import json
import subprocess
import sys

PROBE = r"""
import json, os, sys
from agent_server.cli import _fast_initialize
rfd, wfd = os.pipe()
line = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
params = _fast_initialize(line, wfd)
loaded = [m for m in ("asyncio", "httpx", "httpx_sse", "pydantic", "lsprotocol", "logging",
                      "agent_server.llm", "agent_server.server.acp") if m in sys.modules]
print(json.dumps({"loaded": loaded, "answer": os.read(rfd, 65536).decode(), "params": params}))
"""


def test_initialize_is_answered_before_asyncio_httpx_and_pydantic_are_imported():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["loaded"] == []
    answer = json.loads(result["answer"])
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1
    assert result["params"] == {"protocolVersion": 1}


def test_fast_path_leaves_anything_but_initialize_to_the_engine():
    probe = (
        "import os; from agent_server.cli import _fast_initialize; r, w = os.pipe();"
        "print(_fast_initialize(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\"}\\n', w),"
        " _fast_initialize(b'not json\\n', w), _fast_initialize(b'[1]\\n', w))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None", "None"]
