"""One way down (issue 27 item 2): no import cycle between the packages of ``agent_server``, none
between the modules inside one, and every import goes down the layer table of
docs/architecture.md §2, which lists every package. Read from the source: every import counts,
function-level ones included (only ``if TYPE_CHECKING:`` imports are left out: they never run).

A package here is a folder under ``agent_server/`` — ``server/rpc``, ``server/acp`` and
``server/lsp`` each count as one of their own; ``server``'s own modules (``server/edits.py``) are
the ``server`` package. The package root (``__init__``: the version) may be imported by anyone,
and ``__main__`` imports the command.
"""

import ast
import re
from pathlib import Path

from support.imports import PACKAGE, import_graph, inside

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
OWN_PACKAGES = ("server.rpc", "server.acp", "server.lsp")


def package_of(module: str) -> str:
    """``agent_server.server.acp.server`` → ``server.acp``; ``agent_server.policy.sandbox.x`` →
    ``policy``; the root → ``agent_server``; ``agent_server.__main__`` → ``__main__``."""
    rest = module.split(".")[1:]
    if not rest:
        return "agent_server"
    if len(rest) > 1 and ".".join(rest[:2]) in OWN_PACKAGES:
        return ".".join(rest[:2])
    return rest[0]


def cross_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) → the module imports that make it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target in sorted(targets):
            a, b = package_of(module), package_of(target)
            if a != b and b != "agent_server":
                edges.setdefault((a, b), []).append(f"{module} imports {target}")
    return edges


def cycles(nodes, successors) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each as one cycle
    through it, named in order and closed (``[a, b, a]``)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in successors(v):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_a_cycle(sorted(component), successors))

    for node in sorted(nodes):
        if node not in index:
            strong(node)
    return found


def _a_cycle(component: list[str], successors) -> list[str]:
    """A shortest way from the component's first node back to itself, inside the component."""
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in successors(node):
                if nxt == start:
                    return paths[node] + [start]
                if nxt in component and nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    following.append(nxt)
        frontier = following
    return component


def package_cycles(package: Path = PACKAGE) -> list[str]:
    """Each import cycle between packages, named with the module imports that close it."""
    edges = cross_edges(import_graph(package))
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    named = []
    for cycle in cycles(graph, lambda v: sorted(graph[v])):
        steps = [f"{a} → {b} ({edges[(a, b)][0]})" for a, b in zip(cycle, cycle[1:])]
        named.append(" → ".join(cycle) + ": " + "; ".join(steps))
    return named


def module_cycles(package: Path = PACKAGE) -> list[str]:
    """Each import cycle between the modules of one package. An import of one's own enclosing
    package (its ``__init__``) is not counted: that package is being imported already."""
    graph = import_graph(package)

    def successors(module: str) -> list[str]:
        return sorted(t for t in graph[module]
                      if package_of(t) == package_of(module) and not inside(module, t))

    return [" → ".join(cycle) for cycle in cycles(graph, successors)]


def layer_table() -> list[str]:
    """The packages of docs/architecture.md §2's table, top to bottom."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## 2. Layers"):text.index("## 3.")]
    rows = re.findall(r"^\| `([a-z_/.]+)` \|", section, flags=re.M)
    return [row.removesuffix("/").removesuffix("/edits.py").replace("/", ".") for row in rows]


def test_no_import_cycle_between_packages():
    """Was: ``spare ↔ cli``, ``policy → spare → tools → policy``, ``config_resolve ↔
    credentials`` (loose modules at the root, each a package of its own)."""
    assert package_cycles() == []


def test_no_import_cycle_inside_a_package():
    """Was: ``config.resolve ↔ config.credentials``, ``cli.run ↔ cli.approvals``,
    ``offline._script ↔ offline.demo_task``."""
    assert module_cycles() == []


def test_the_layer_table_lists_every_package_once():
    table = layer_table()
    packages = {package_of(m) for m in import_graph()} - {"agent_server", "__main__"}
    assert len(table) == len(set(table)), table
    assert sorted(set(table)) == sorted(packages)


def test_every_import_goes_down_the_layer_table():
    order = {name: i for i, name in enumerate(layer_table())}
    upward = {f"{a} → {b}": found[:3] for (a, b), found in cross_edges(import_graph()).items()
              if a != "__main__" and order[a] >= order[b]}
    assert upward == {}


def test_the_package_root_holds_only_init_and_main():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]


def test_package_init_files_import_nothing_eagerly():
    """The fast path imports ``config.resolve``, ``config.views``, ``server.acp.initialize`` and
    ``server.acp.fast_session`` only: no package ``__init__`` on the way loads more (PEP 562 where
    a package offers names). ``cli`` imports its ``main`` (standard library only: the console
    script's ``agent_server.cli:main``); ``prompt``'s ``__init__`` is the prompt module itself."""
    graph = import_graph()
    eager = {}
    for path in PACKAGE.rglob("__init__.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).parent.parts)
        tree = ast.parse(path.read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               and not (getattr(n, "module", None) in ("__future__", "typing", "importlib")
                        or any(a.name == "importlib" for a in n.names))]
        if top and module not in ("agent_server.cli", "agent_server.prompt"):
            eager[module] = [ast.unparse(n) for n in top]
    assert eager == {}
    assert graph["agent_server.cli"] <= {"agent_server.cli.main"}


def test_the_warm_spare_is_gone():
    """Issue 27: no ``spare/`` package and no ``AGENT_SERVER_SPARE*`` variable in the package, the
    README or the bench (the README's upgrade note names the old spare's command line only)."""
    assert not (PACKAGE / "spare").exists()
    root = PACKAGE.parent
    texts = [*PACKAGE.rglob("*.py"), root / "README.md", *(root / "bench").glob("*.py"), *(root / "scripts").glob("*")]
    assert [str(p) for p in texts if p.is_file() and "AGENT_SERVER_SPARE" in p.read_text(errors="replace")] == []
