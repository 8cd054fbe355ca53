"""Module headers (issue 27 item 3): every module of ``agent_server`` says its Role and what it
Must never do within the first ~15 lines of its docstring, and no docstring or comment carries a
measured duration, share or size — measurements belong in bench/README.md ("Measurements moved out
of the code"), where they can be re-taken and dated. Package ``__init__`` files (a summary of the
package) and ``__main__`` are not held to the labels."""

import ast
import io
import re
import tokenize

from support.imports import PACKAGE

HEADER_LINES = 16
MEASURED = re.compile(r"[~≈]\s?\d[\d.,]*\s?(ms|µs|us|ns|s|%|MiB|MB|KiB|kB|KB)\b"
                      r"|\d[\d.,]*\s?[×x]\s+(faster|slower)|\d+\s?[–-]\s?\d+\s?(ms|µs)\b")


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def test_every_module_names_its_role_and_what_it_must_never_do_first():
    missing = {}
    for path in modules():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        doc = (ast.get_docstring(ast.parse(path.read_text()), clean=False) or "").splitlines()[:HEADER_LINES]
        head = "\n".join(doc)
        lacks = [label for label, words in (("Role", ("Role",)), ("Must never", ("Must never", "Must not")))
                 if not any(w in head for w in words)]
        if lacks:
            missing[str(path.relative_to(PACKAGE.parent))] = lacks
    assert missing == {}


def test_no_docstring_or_comment_carries_a_measurement():
    found = []
    for path in modules():
        source = path.read_text()
        texts = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                 if tok.type == tokenize.COMMENT]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                texts.append(ast.get_docstring(node, clean=False) or "")
        for text in texts:
            for match in MEASURED.finditer(text):
                found.append(f"{path.relative_to(PACKAGE.parent)}: {text[max(0, match.start() - 40):match.end() + 10]!r}")
    assert found == []
