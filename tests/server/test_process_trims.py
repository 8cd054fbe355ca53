"""``agent_server.cli.trims``: the CLI's process keeps pydantic from scanning every installed
distribution for plugins, without changing what pydantic does or what child processes see."""

import json
import subprocess
import sys

SERVER_IMPORTS = r"""
import json, os, sys
from agent_server.cli import trims as process_trims
process_trims.apply()
import agent_server.config.load, agent_server.server.acp.server, agent_server.server.rpc.stdio
config = agent_server.config.load_config(env={}, path=os.devnull)
loader = sys.modules[process_trims.LOADER]
calls = []
loader.get_plugins = lambda: calls.append(1) or ()
from pydantic import BaseModel
class Probe(BaseModel):
    x: int
Probe(x=1)
print(json.dumps({"metadata": "importlib.metadata" in sys.modules, "stand_in": getattr(loader, "_stand_in", False),
                  "consulted": len(calls), "env": "PYDANTIC_DISABLE_PLUGINS" in os.environ}))
"""


def run(code: str) -> dict:
    return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def test_server_import_does_not_scan_pydantic_plugins():
    result = run(SERVER_IMPORTS)
    assert result["metadata"] is False  # importlib.metadata: only the plugin scan imported it
    assert result["stand_in"] is True
    assert result["consulted"] >= 1  # pydantic still asks the loader: the trim is still effective
    assert result["env"] is False  # nothing a child process inherits


def test_any_other_loader_name_loads_pydantics_own_loader():
    result = run("import json, sys; from agent_server.cli import trims as process_trims; process_trims.apply();"
                 "import pydantic.plugin; from pydantic.plugin import _loader as stand_in;"
                 "group = stand_in.PYDANTIC_ENTRY_POINT_GROUP; real = sys.modules[process_trims.LOADER];"
                 "print(json.dumps([group, getattr(real, '_stand_in', False), real.get_plugins is not stand_in.get_plugins]))")
    assert result == ["pydantic", False, True]


def test_a_process_that_loaded_the_real_loader_keeps_it():
    result = run("import json, sys; import pydantic.plugin._loader as real; from agent_server.cli import trims as process_trims;"
                 "process_trims.apply(); print(json.dumps(sys.modules[process_trims.LOADER] is real))")
    assert result is True
