"""Start-up: ``initialize`` is answered before the heavy modules load (DESIGN.md §10)."""

import json
import subprocess
import sys

PROBE = r"""
import json, os, sys
from agent_server.cli.serve import _fast_initialize
rfd, wfd = os.pipe()
line = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
params = _fast_initialize(line, wfd)
loaded = [m for m in ("asyncio", "httpx", "httpx_sse", "pydantic", "lsprotocol", "logging",
                      "agent_server.llm", "agent_server.server.acp.server") if m in sys.modules]
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
        "import os; from agent_server.cli.serve import _fast_initialize; r, w = os.pipe();"
        "print(_fast_initialize(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\"}\\n', w),"
        " _fast_initialize(b'not json\\n', w), _fast_initialize(b'[1]\\n', w))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None", "None"]


GC_PROBE = r"""
import asyncio, gc, json, sys
import agent_server.cli.serve as cli
seen = {}
def run(coroutine):
    coroutine.close()
    seen.update(enabled=gc.isenabled(), frozen=gc.get_freeze_count(),
                loaded=[m for m in ("agent_server.config.load", "agent_server.server.acp.server") if m in sys.modules])
    return 0
asyncio.run = run
status = cli._serve(None)
sys.stderr.write(json.dumps({**seen, "status": status}) + "\n")
"""


def test_the_server_runs_with_the_collector_on_and_its_modules_frozen(tmp_path):
    """``_serve`` pauses the garbage collector while the server's modules load, then freezes what
    they built and switches it back on before the server runs (``cli._end_gc_pause``)."""
    line = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    env = {"AGENT_SERVER_NO_FAST_SESSION": "1", "XDG_CONFIG_HOME": str(tmp_path),
           "AGENT_SERVER_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", GC_PROBE], input=line, capture_output=True, check=True, env=env)
    seen = json.loads(out.stderr.decode().strip().splitlines()[-1])
    assert seen["enabled"] is True and seen["status"] == 0
    assert seen["frozen"] > 10_000  # the modules' objects: not walked by every later full collection
    assert seen["loaded"] == ["agent_server.config.load", "agent_server.server.acp.server"]
