"""The LSP front end sits beside the ACP one over the host, and the ACP path never loads pygls."""

import json
import subprocess
import sys

from support.imports import import_graph, inside as _in

PROBE = r"""
import json, sys
import agent_server.cli, agent_server.server.rpc.stdio, agent_server.server.acp.server, agent_server.cli.run
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("pygls", "pytest_lsp")
                        or m.startswith("agent_server.server.lsp"))))
"""


def test_importing_the_acp_server_path_does_not_import_pygls():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_two_front_ends_sit_side_by_side_over_the_host():
    graph = import_graph()
    lsp = {m for m in graph if _in(m, "agent_server.server.lsp")}
    acp = {"agent_server.server.acp.server", "agent_server.server.rpc.stdio", "agent_server.server.acp.permissions",
           "agent_server.server.acp.editor_files", "agent_server.server.rpc.jsonrpc", "agent_server.server.acp.models"}
    assert lsp and all(m in graph for m in acp)
    assert {m: sorted(graph[m] & acp) for m in lsp if graph[m] & acp} == {}  # LSP uses nothing of ACP's
    assert {m: sorted(t for t in graph[m] if _in(t, "agent_server.server.lsp")) for m in acp
            if any(_in(t, "agent_server.server.lsp") for t in graph[m])} == {}
    assert any(_in(t, "agent_server.host") for m in lsp for t in graph[m])
    assert any(_in(t, "agent_server.host") for t in graph["agent_server.server.acp.server"])
