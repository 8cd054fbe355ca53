"""The VS Code extension's own checks, run from pytest so ``bash scripts/test.sh`` covers them:
``tsc --noEmit`` (strict) and the vitest unit tests (stubbed ``vscode`` module; a scripted ACP agent as
a real child process)."""

from __future__ import annotations

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
