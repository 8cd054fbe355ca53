"""Reports how long the editor scenarios took at the end of the run (CI prints it)."""

from __future__ import annotations

from support.vscode_tools import TIMINGS


def pytest_terminal_summary(terminalreporter):
    for line in TIMINGS:
        terminalreporter.write_line(line)
