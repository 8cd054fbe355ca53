"""Unit checks of the plugin's pure Lua parts (``lua/units.lua``) in a real Neovim, stable and 0.12 dev:
position conversion (emoji, combining marks, CRLF), hunk spans and shifting, the permission diff."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.nvim import DEV, PLUGIN, STABLE, nvim_binary

UNITS = Path(__file__).resolve().parent / "lua" / "units.lua"


@pytest.mark.parametrize("package", [STABLE, DEV])
def test_lua_units(package):
    run = subprocess.run([str(nvim_binary(package)), "--clean", "--headless", "-l", str(UNITS)],
                         env={**os.environ, "AGENT_SERVER_PLUGIN": str(PLUGIN)}, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "units: ok" in run.stdout, run.stdout + run.stderr
