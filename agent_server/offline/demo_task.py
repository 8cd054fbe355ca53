"""The offline demo's small real task: fix a bug in a tiny project, scripted as model streams.

Role: the project files (``PROJECT_FILES``) and the scripted answers (``demo_task_script()``) that
make agent-server do a real read → run tests → edit → run tests → report cycle in a real workspace
without any model. The tool calls are real; only the model's side is replayed — and the demo says
so. The e2e tests use the same script, so the demo cannot silently rot.

Must never: pretend to be a model (every answer is fixed in advance) or use absolute paths (the
calls name files relative to the workspace, which agent-server resolves against its first root).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ._streams import text_stream, tool_call_stream

DEMO_TASK_PROMPT = "The tests in this project fail. Find the bug, fix it, and run the tests."

# the texts of the demo project's files (their print calls belong to its test script, run in the workspace)
PROJECT_FILES: dict[str, str] = {
    "calc.py": (
        '"""A tiny calculator (the agent-server demo project)."""\n'
        "\n"
        "\n"
        "def add(a, b):\n"
        '    """Return the sum of a and b."""\n'
        "    return a - b\n"
        "\n"
        "\n"
        "def mean(values):\n"
        '    """Return the arithmetic mean of a non-empty list."""\n'
        "    return sum(values) / len(values)\n"
    ),
    "test_calc.py": (
        '"""Run with: python3 test_calc.py"""\n'
        "import sys\n"
        "\n"
        "from calc import add, mean\n"
        "\n"
        "failures = 0\n"
        "for got, want, what in [(add(2, 3), 5, 'add(2, 3)'), (mean([1, 2, 3]), 2, 'mean([1, 2, 3])')]:\n"
        "    if got != want:\n"
        "        print(f'FAIL: {what} == {got}, expected {want}')\n"
        "        failures += 1\n"
        "print('ok' if not failures else f'{failures} failed')\n"
        "sys.exit(1 if failures else 0)\n"
    ),
}

_DELAY = 0.03


def write_project(folder: Path) -> Path:
    """Write ``PROJECT_FILES`` into ``folder`` (created if needed); returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in PROJECT_FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _call(call_id: str, name: str, **arguments: Any) -> tuple[str, str, str]:
    return call_id, name, json.dumps(arguments)


def demo_task_script() -> list[dict[str, Any]]:
    """The scripted answers, one per model request, in order (six steps)."""
    run_tests = {"command": "python3 test_calc.py", "description": "Run the tests"}
    return [
        tool_call_stream([_call("call_read", "read", path="calc.py")],
                         text="I'll read the code first.", delay=_DELAY),
        tool_call_stream([_call("call_test1", "bash", **run_tests)],
                         text="Let me run the tests to see what fails.", delay=_DELAY),
        tool_call_stream([_call("call_fix", "edit", path="calc.py", old_string="    return a - b\n",
                                new_string="    return a + b\n")],
                         text="`add` subtracts instead of adding. Fixing it.", delay=_DELAY),
        tool_call_stream([_call("call_test2", "bash", **run_tests)],
                         text="Running the tests again.", delay=_DELAY),
        tool_call_stream([_call("call_grep", "grep", pattern=r"a - b|a \+ b", glob="*.py")],
                         text="Checking nothing else uses the old expression.", delay=_DELAY),
        text_stream("Fixed: `add` in calc.py returned `a - b`; it now returns `a + b`, and "
                    "`python3 test_calc.py` prints ok. (This answer was scripted by the offline "
                    "demo endpoint; the tool calls above really ran in your workspace.)",
                    chunk_size=12, delay=_DELAY,
                    reasoning="The tests pass after the fix; summarise.", model="offline-demo"),
    ]
