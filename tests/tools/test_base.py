"""The definition contract: schemas the model sees, argument validation, registry, paths, the
never-raise wrapper, and the package staying a leaf."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jsonschema
import pydantic
import pytest

from agent_server.tools import (
    BUILTIN_TOOLS,
    Tool,
    ToolArgs,
    ToolContext,
    ToolResult,
    display_path,
    get_tool,
    resolve_path,
    tool_schemas,
    validate_args,
)

CONTRACT = {
    "read": (["path", "offset", "limit"], ["path"], "read", True),
    "write": (["path", "content"], ["path", "content"], "edit", False),
    "edit": (["path", "old_string", "new_string", "replace_all"], ["path", "old_string", "new_string"], "edit", False),
    "bash": (["command", "timeout_ms", "description"], ["command"], "execute", False),
    "glob": (["pattern", "path"], ["pattern"], "search", True),
    "grep": (["pattern", "path", "glob", "ignore_case"], ["pattern"], "search", True),
    "plan": (["entries"], ["entries"], "think", False),
}


def test_builtins_are_the_six_of_the_contract_in_order_then_plan():
    assert [t.name for t in BUILTIN_TOOLS] == ["read", "write", "edit", "bash", "glob", "grep", "plan"]
    assert get_tool("bash") is BUILTIN_TOOLS[3] and get_tool("shell") is None
    assert [s["function"]["name"] for s in tool_schemas()] == list(CONTRACT)


@pytest.mark.parametrize("name", list(CONTRACT))
def test_schema_has_exactly_the_contract_arguments(name):
    args, required, kind, safe = CONTRACT[name]
    tool = get_tool(name)
    schema = tool.schema()
    assert set(schema) == {"type", "function"} and schema["type"] == "function"
    assert set(schema["function"]) == {"name", "description", "parameters"}
    params = schema["function"]["parameters"]
    assert list(params["properties"]) == args
    assert params["required"] == required
    assert params["additionalProperties"] is False and params["type"] == "object"
    text = json.dumps(params)
    assert '"title"' not in text and "anyOf" not in text and "null" not in text
    jsonschema.Draft202012Validator.check_schema(params)
    assert (tool.kind, tool.concurrency_safe) == (kind, safe)
    assert all(p.get("description") for p in params["properties"].values())


def test_schema_output_is_deterministic_and_not_shared():
    first = json.dumps(tool_schemas())
    tool_schemas()[0]["function"]["name"] = "mutated"
    assert json.dumps(tool_schemas()) == first
    assert all(json.dumps(t.schema()) == json.dumps(t.schema()) for t in BUILTIN_TOOLS)


@pytest.mark.parametrize(
    "name,arguments",
    [
        ("read", {"path": "a", "offset": 3}),
        ("read", {"path": "a", "offset": 0}),
        ("read", {"path": "a", "limit": "10"}),
        ("read", {"path": "a", "extra": 1}),
        ("edit", {"path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
        ("bash", {"command": "ls", "timeout_ms": 600_000}),
        ("bash", {"command": "ls", "timeout_ms": 600_001}),
        ("grep", {"pattern": "x", "ignore_case": True}),
        ("glob", {}),
    ],
)
def test_validation_agrees_with_the_published_schema(name, arguments):
    tool = get_tool(name)
    params = tool.schema()["function"]["parameters"]
    schema_ok = jsonschema.Draft202012Validator(params).is_valid(arguments)
    parsed = validate_args(tool, json.dumps(arguments))
    assert (not isinstance(parsed, ToolResult)) == schema_ok


def test_validate_args_errors_are_readable():
    read = get_tool("read")
    res = validate_args(read, "")
    assert isinstance(res, ToolResult) and res.is_error and "`path` is required" in res.text
    assert '"path": string (required)' in res.text
    res = validate_args(read, '{"path": "a.py", "offset": "10"}')
    assert "`offset`" in res.text and "integer" in res.text and "'10'" in res.text
    res = validate_args(read, '{"path": "a.py", "lines": 5}')
    assert "`lines` is not an argument of `read` (allowed: path, offset, limit)" in res.text
    res = validate_args(read, '{"path": "a.py",')
    assert "not valid JSON" in res.text and "character" in res.text
    res = validate_args(read, '["a.py"]')
    assert "expected a JSON object" in res.text
    ok = validate_args(read, '{"path": "a.py", "offset": 2}')
    assert ok.path == "a.py" and ok.offset == 2 and ok.limit is None
    with pytest.raises(pydantic.ValidationError):
        ok.path = "b.py"  # arguments are frozen: nothing rewrites them


def test_empty_string_counts_as_empty_object():
    class NoArgs(ToolArgs):
        pass

    class Ping(Tool):
        name, description, Args, kind = "ping", "Ping.", NoArgs, "other"

        def title(self, args, ctx):
            return "Ping"

        async def execute(self, args, ctx):
            return ToolResult("pong")

    assert isinstance(validate_args(Ping(), ""), NoArgs)
    assert isinstance(validate_args(Ping(), "  "), NoArgs)


async def test_an_unexpected_exception_becomes_an_error_result(tmp_path):
    class NoArgs(ToolArgs):
        pass

    class Broken(Tool):
        name, description, Args, kind = "broken", "Breaks.", NoArgs, "other"

        def title(self, args, ctx):
            return "Broken"

        async def execute(self, args, ctx):
            raise KeyError("boom")

    res = await Broken().run(NoArgs(), ToolContext.on_disk(tmp_path))
    assert res.is_error and "KeyError" in res.text and "boom" in res.text


def test_paths_resolve_against_the_first_root_and_display_relative(tmp_path):
    roots = (tmp_path / "ws", tmp_path / "other")
    assert resolve_path("src/a.py", roots) == tmp_path / "ws" / "src" / "a.py"
    assert resolve_path("./src/../b.py", roots) == tmp_path / "ws" / "b.py"
    assert resolve_path("/etc/hosts", roots) == Path("/etc/hosts")
    assert resolve_path("~/x", roots) == Path.home() / "x"
    assert display_path(tmp_path / "ws" / "src" / "a.py", roots) == "src/a.py"
    assert display_path(tmp_path / "ws", roots) == "."
    assert display_path(tmp_path / "other" / "c.py", roots) == str(tmp_path / "other" / "c.py")


# The modules this package owns; the pipeline/batching modules added next to them by the agent
# layer's work are not part of this check.
OWN_MODULES = [
    "__init__", "base", "files", "text", "output", "read", "write_edit", "bash", "search",
    "registry", "_rg", "_walk", "_globmatch", "edit_text",
]


@pytest.mark.parametrize("module", OWN_MODULES)
def test_the_tool_modules_import_nothing_of_agent_server_outside_the_package(module):
    import agent_server.tools as pkg

    source = (Path(pkg.__file__).parent / f"{module}.py").read_text()
    tree = ast.parse(source)
    assert ast.get_docstring(tree), f"{module} needs a module docstring"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        else:
            continue
        for n in names:
            assert not (n == "agent_server" or n.startswith("agent_server.")) or n.startswith("agent_server.tools"), n
    assert len(source.splitlines()) < 420, f"{module} is getting long"
