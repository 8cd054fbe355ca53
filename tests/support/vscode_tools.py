"""Where the VS Code end-to-end tools are (installed by ``scripts/setup-vscode.sh``, which writes
``env.sh`` into the tools folder): Node 24, code-server's entry point, the system Chromium, the .vsix.

A missing tool is a test failure with the command that installs it, never a skip.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "clients" / "vscode"


def tools_dir() -> Path:
    return Path(os.environ.get("AGENT_SERVER_TOOLS") or Path.home() / ".cache" / "agent-server-vscode")


@dataclass(frozen=True)
class Tools:
    node: str
    code_server_entry: str
    chromium: str
    vsix: str


def find_tools() -> Tools:
    """The installed tools; fails the test (with the fix) when one is missing."""
    env_file = tools_dir() / "env.sh"
    if not env_file.is_file():
        pytest.fail(f"{env_file} is missing: run `bash scripts/setup-vscode.sh` (scripts/test.sh does)")
    values = {name: (shlex.split(value) or [""])[0]
              for name, value in (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)}
    # the .vsix of THIS checkout (env.sh names the one of whichever checkout ran the set-up last)
    tools = Tools(values.get("NODE24", ""), values.get("CODE_SERVER_ENTRY", ""), values.get("CHROMIUM", ""),
                  str(EXTENSION / "dist" / "agent-server-vscode.vsix"))
    for name, path in vars(tools).items():
        if not path or not Path(path).exists():
            pytest.fail(f"{name} ({path!r}) is missing: run `bash scripts/setup-vscode.sh`")
    return tools


#: The source hash ``scripts/setup-vscode.sh`` stamps into ``dist/.agent-server-built`` when it builds the
#: .vsix (the same pipeline, run in clients/vscode; test_vscode_unit checks the script still has it).
SOURCE_HASH = ("find src webview media scripts package.json tsconfig.json README.md .vscodeignore -type f | sort "
               "| xargs sha256sum | sha256sum | cut -d' ' -f1")


def check_vsix_current() -> None:
    """Fails the test when the .vsix was built from other sources than this checkout's extension
    (changed since the last ``setup-vscode.sh``): the scenarios would test the old extension."""
    now = subprocess.run(["bash", "-c", SOURCE_HASH], cwd=EXTENSION, capture_output=True, text=True).stdout.strip()
    stamp = EXTENSION / "dist" / ".agent-server-built"
    if not stamp.is_file() or stamp.read_text().strip() != now:
        pytest.fail("clients/vscode changed since its .vsix was built: run `bash scripts/setup-vscode.sh` "
                    "(it rebuilds the .vsix when the sources changed; scripts/test.sh does)")


#: Lines for the end-of-run summary (tests/vscode/conftest.py prints them): how long the scenarios took.
TIMINGS: list[str] = []
