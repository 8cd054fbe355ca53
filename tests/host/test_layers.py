"""The import graph of the front ends and the session host (DESIGN.md §2), read from the source."""

from support.imports import import_graph, inside as _in


def test_the_host_imports_no_front_end():
    graph = import_graph()
    host = {m for m in graph if _in(m, "agent_server.host")}
    assert host, "the session host package is missing"
    offending = {m: sorted(t for t in graph[m] if _in(t, "agent_server.server")) for m in host}
    assert {m: t for m, t in offending.items() if t} == {}


def test_the_acp_front_end_drives_the_host():
    graph = import_graph()
    assert any(_in(t, "agent_server.host") for t in graph["agent_server.server.acp.server"])


def test_no_import_circle_among_the_host_and_the_front_ends():
    graph = import_graph()
    scope = {m for m in graph if _in(m, "agent_server.host") or _in(m, "agent_server.server")}
    # a package's __init__ re-exporting its own modules is not a circle between layers
    edges = {m: {t for t in graph[m] & scope if not (_in(t, m) and t != m)} for m in scope}
    seen: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        seen[node] = 1
        for nxt in sorted(edges[node]):
            if seen.get(nxt) == 1:
                cycle.extend(path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt])
                return True
            if nxt not in seen and visit(nxt, path + [node]):
                return True
        seen[node] = 2
        return False

    for start in sorted(scope):
        if start not in seen and visit(start, []):
            break
    assert cycle == []
