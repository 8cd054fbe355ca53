"""The VS Code extension's own checks, run from pytest so ``bash scripts/test.sh`` covers them:
``tsc --noEmit`` (strict) and the vitest unit tests (stubbed ``vscode`` module; a scripted ACP agent as
a real child process)."""

from __future__ import annotations

import json
import subprocess

from support.vscode_tools import EXTENSION, find_tools


def npx(tools, *args, timeout=600):
    bin_dir = EXTENSION / "node_modules" / ".bin"
    proc = subprocess.run([tools.node, str(bin_dir / args[0]), *args[1:]], cwd=EXTENSION,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def test_typescript_compiles_cleanly_in_strict_mode():
    code, out = npx(find_tools(), "tsc", "--noEmit", "-p", ".")
    assert code == 0, out


def test_vitest_unit_tests_pass():
    code, out = npx(find_tools(), "vitest", "run", "--reporter=dot")
    assert code == 0, out[-6000:]
    assert " passed" in out and "failed" not in out.split("Tests")[-1], out[-2000:]


def test_settings_that_choose_the_server_or_the_key_s_destination_cannot_come_from_a_workspace():
    """package.json: agentServer.path, args, baseUrl and model are machine-scoped (VS Code ignores a
    workspace's or folder's value) and restricted in an untrusted workspace; every other setting
    that is not so scoped must be one the extension reads with a workspace check (mode)."""
    manifest = json.loads((EXTENSION / "package.json").read_text())
    props = manifest["contributes"]["configuration"]["properties"]
    launch = {"agentServer.path", "agentServer.args", "agentServer.baseUrl", "agentServer.model"}
    for key in launch:
        assert props[key].get("scope") in ("machine", "application"), key
    assert set(props) - launch == {"agentServer.mode"}, "a new setting: decide its scope"
    restricted = manifest["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]
    assert launch <= set(restricted)
    # and the vitest cases that drive the whole extension with workspace values set
    code, out = npx(find_tools(), "vitest", "run", "--reporter=dot", "-t", "settings written by the workspace|readSettings|effectiveMode")
    assert code == 0, out[-6000:]
    assert " passed" in out and "failed" not in out.split("Tests")[-1], out[-2000:]


def test_a_stale_vsix_was_installed_by_the_end_to_end_scenarios_without_a_word():
    """The e2e scenarios install clients/vscode/dist's .vsix, which scripts/setup-vscode.sh builds when
    the sources changed; run without it after a change, they tested the old extension against new
    scenarios (a helper read main as broken). The fixture now compares the stamp with the sources'
    hash — the same pipeline as the script's."""
    from support.vscode_tools import SOURCE_HASH

    script = (EXTENSION.parents[1] / "scripts" / "setup-vscode.sh").read_text()
    assert f"src_hash=$(cd \"$EXT\" && {SOURCE_HASH})" in script
