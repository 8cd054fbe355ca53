"""The import graph of ``agent_server``, read from the source (DESIGN.md §2 layering tests).

Every import statement counts, function-level ones included, relative ones resolved; only those
under ``if TYPE_CHECKING:`` are left out (they never run).
"""

import ast
from pathlib import Path

import agent_server

PACKAGE = Path(agent_server.__file__).parent


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module → the ``agent_server`` modules it imports anywhere in its body (function-level too).

    ``from X import a`` counts as an import of ``X`` and, when ``X.a`` is a module, of ``X.a``."""
    modules = {_module_name(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text())
        skipped = _type_checking_only(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)] + ([node.module] if node.module else [])
                    module = ".".join(base)
                else:
                    module = node.module or ""
                targets.add(module)
                targets |= {f"{module}.{a.name}" for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")
