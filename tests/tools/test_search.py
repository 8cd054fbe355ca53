"""``glob`` and ``grep`` with both backends (ripgrep and the pure-Python walk): .gitignore,
newest-first order, bounds, long lines, errors."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from tooltest_helpers import FIXTURES, KATEX

from agent_server.tools import ToolContext, ToolResult, validate_args
from agent_server.tools._rg import find_rg
from agent_server.tools.search import MAX_FILES, MAX_MATCHES, GlobTool, GrepTool

BACKENDS = ["rg", "python"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "rg" and find_rg() is None:
        pytest.fail("rg not found: install the ripgrep wheel (ripgrep==14.1.0)")
    return request.param


@pytest.fixture
def tree(tmp_path):
    """A git-less folder with a .gitignore, hidden files, a nested ignore and a .git folder."""
    root = tmp_path / "proj"
    files = {
        ".gitignore": "build/\n*.log\n!keep.log\n",
        "app.py": "import os\nTOKEN = 'needle'\n",
        "src/lib.py": "def needle():\n    return 1\n",
        "src/deep/mod.py": "x = 'Needle'\n",
        "src/.gitignore": "generated.py\n",
        "src/generated.py": "needle = 1\n",
        "build/out.py": "needle = 2\n",
        "debug.log": "needle in a log\n",
        "keep.log": "needle kept\n",
        ".github/ci.yml": "needle: yes\n",
        ".git/config": "needle = git\n",
        "notes.txt": "nothing here\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


async def run(tool, ctx, **arguments):
    import json

    args = validate_args(tool, json.dumps(arguments))
    assert not isinstance(args, ToolResult), args.text
    return await tool.run(args, ctx)


def set_mtimes(root, order):
    """Give files increasing mtimes in ``order`` (last = newest)."""
    for i, rel in enumerate(order):
        os.utime(root / rel, (1_600_000_000 + i * 100, 1_600_000_000 + i * 100))


async def test_glob_respects_gitignore_and_lists_newest_first(tree, backend):
    ctx = ToolContext.on_disk(tree)
    set_mtimes(tree, ["src/deep/mod.py", "app.py", "src/lib.py"])
    res = await run(GlobTool(backend), ctx, pattern="*.py")
    assert not res.is_error
    assert res.text.splitlines() == ["src/lib.py", "app.py", "src/deep/mod.py"]
    res = await run(GlobTool(backend), ctx, pattern="**/*")
    listed = set(res.text.splitlines())
    assert {".github/ci.yml", "keep.log", ".gitignore", "notes.txt"} <= listed
    assert not listed & {"build/out.py", "debug.log", "src/generated.py", ".git/config"}


async def test_glob_anchored_patterns_and_subfolder_paths(tree, backend):
    ctx = ToolContext.on_disk(tree)
    assert (await run(GlobTool(backend), ctx, pattern="src/*.py")).text == "src/lib.py"
    res = await run(GlobTool(backend), ctx, pattern="deep/*.py", path="src")
    assert res.text == "src/deep/mod.py"  # relative to the workspace folder, ready for `read`
    res = await run(GlobTool(backend), ctx, pattern="*.rs")
    assert not res.is_error and res.text.startswith("No files match")


async def test_glob_outside_the_workspace_gives_absolute_paths(tree, tmp_path, backend):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "x.py").write_text("")
    ctx = ToolContext.on_disk(tree)
    assert (await run(GlobTool(backend), ctx, pattern="*.py", path=str(other))).text == str(other / "x.py")


async def test_glob_count_is_bounded_and_says_how_many_more(tmp_path, backend):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(MAX_FILES + 37):
        (root / f"f{i:03d}.txt").write_text("")
        os.utime(root / f"f{i:03d}.txt", (1_600_000_000 + i, 1_600_000_000 + i))
    res = await run(GlobTool(backend), ToolContext.on_disk(root), pattern="*.txt")
    lines = res.text.splitlines()
    assert lines[0] == f"f{MAX_FILES + 36:03d}.txt"  # the newest
    assert len(lines) == MAX_FILES + 1
    assert f"{MAX_FILES + 37} files match; showing the {MAX_FILES} most recently modified" in lines[-1]


async def test_glob_and_grep_keep_a_file_name_with_a_newline_whole(tmp_path, backend):
    root = tmp_path / "nl"
    root.mkdir()
    (root / "a\nb.py").write_text("needle\n")  # rg's newline-separated listing split it into "a" and "b.py"
    (root / "c.py").write_text("x = 1\n")
    set_mtimes(root, ["c.py", "a\nb.py"])
    ctx = ToolContext.on_disk(root)
    res = await run(GlobTool(backend), ctx, pattern="*.py")
    assert res.meta["count"] == 2
    lines = res.text.splitlines()
    assert lines[:2] == ['"a\\nb.py"', "c.py"]  # one name, written as a JSON string
    assert json.loads(lines[0]) == "a\nb.py" and (root / json.loads(lines[0])).is_file()
    assert "written as a JSON string" in lines[2]
    res = await run(GlobTool(backend), ctx, pattern="b.py")
    assert res.meta["count"] == 0, res.text
    res = await run(GrepTool(backend), ctx, pattern="needle")
    assert res.text.splitlines()[0] == '"a\\nb.py":1: needle'


async def test_glob_errors(tree, backend):
    ctx = ToolContext.on_disk(tree)
    assert (await run(GlobTool(backend), ctx, pattern="*.py", path="nope")).is_error
    res = await run(GlobTool(backend), ctx, pattern="*.py", path="app.py")
    assert res.is_error and "folder" in res.text


async def test_grep_respects_gitignore_and_formats_file_line_text(tree, backend):
    ctx = ToolContext.on_disk(tree)
    res = await run(GrepTool(backend), ctx, pattern="needle")
    assert not res.is_error
    assert res.text.splitlines() == [
        ".github/ci.yml:1: needle: yes",
        "app.py:2: TOKEN = 'needle'",
        "keep.log:1: needle kept",
        "src/lib.py:1: def needle():",
    ]


async def test_grep_ignore_case_glob_and_path(tree, backend):
    ctx = ToolContext.on_disk(tree)
    res = await run(GrepTool(backend), ctx, pattern="needle", ignore_case=True, glob="*.py")
    assert res.text.splitlines() == ["app.py:2: TOKEN = 'needle'", "src/deep/mod.py:1: x = 'Needle'",
                                     "src/lib.py:1: def needle():"]
    res = await run(GrepTool(backend), ctx, pattern="needle", path="src/lib.py")
    assert res.text == "src/lib.py:1: def needle():"
    res = await run(GrepTool(backend), ctx, pattern="zzz")
    assert not res.is_error and res.text.startswith("No matches")


async def test_grep_bad_regex_is_a_readable_error(tree, backend):
    res = await run(GrepTool(backend), ToolContext.on_disk(tree), pattern="(unclosed")
    assert res.is_error and "grep failed" in res.text and "regex" in res.text.replace("regular expression", "regex")
    assert ("unclosed" if backend == "rg" else "unterminated") in res.text


async def test_grep_count_is_bounded(tmp_path, backend):
    root = tmp_path / "g"
    root.mkdir()
    (root / "a.txt").write_text("hit\n" * (MAX_MATCHES + 50))
    res = await run(GrepTool(backend), ToolContext.on_disk(root), pattern="hit")
    lines = res.text.splitlines()
    assert len(lines) == MAX_MATCHES + 1 and lines[0] == "a.txt:1: hit"
    assert f"{MAX_MATCHES + 50} matching lines; showing the first {MAX_MATCHES}" in lines[-1]


async def test_grep_in_a_minified_line_shows_a_window_around_the_match(tmp_path, backend):
    root = tmp_path / "m"
    root.mkdir()
    shutil.copyfile(FIXTURES / KATEX, root / "katex.min.js")
    text = (FIXTURES / KATEX).read_text()
    res = await run(GrepTool(backend), ToolContext.on_disk(root), pattern="protocolFromUrl")
    [line] = res.text.splitlines()
    assert line.startswith("katex.min.js:1: …") and "protocolFromUrl" in line
    assert len(line) < 700 and "276,701 characters" in line
    col = text.index("protocolFromUrl")
    assert f"showing {col - 150 + 1:,}-" in line


def test_titles(tree):
    from agent_server.tools.search import GlobArgs, GrepArgs

    ctx = ToolContext.on_disk(tree)
    assert GlobTool().title(GlobArgs(pattern="**/*.py"), ctx) == "Find `**/*.py`"
    assert GlobTool().title(GlobArgs(pattern="*.ts", path="src"), ctx) == "Find `*.ts` in src"
    assert GrepTool().title(GrepArgs(pattern="def main", path=str(tree / "src")), ctx) == "Search `def main` in src"
    assert GrepTool().title(GrepArgs(pattern="x", glob="*.py"), ctx) == "Search `x` (*.py)"


@pytest.mark.parametrize(
    "pattern,path,expected",
    [
        ("*.py", "a.py", True),
        ("*.py", "src/deep/a.py", True),
        ("*.py", "a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("src/*.py", "lib/src/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("**/test_*.py", "tests/unit/test_a.py", True),
        ("*.{js,ts}", "web/app.ts", True),
        ("*.{js,ts}", "web/app.tsx", False),
        ("/a.py", "a.py", True),
        ("/a.py", "sub/a.py", False),
        ("src", "src/any/file.txt", True),
        ("src/", "src/file.txt", True),
        ("file?.txt", "file1.txt", True),
        ("file[!0-9].txt", "file1.txt", False),
        ("file[!0-9].txt", "fileA.txt", True),
        ("**", "x/y", True),
    ],
)
def test_glob_semantics(pattern, path, expected):
    from agent_server.tools._globmatch import compile_glob

    assert compile_glob(pattern)(path) is expected


async def test_brace_patterns_work_with_both_backends(tmp_path, backend):
    root = tmp_path / "b"
    (root / "web").mkdir(parents=True)
    for name in ("app.ts", "app.js", "app.css"):
        (root / "web" / name).write_text("needle\n")
    set_mtimes(root, ["web/app.js", "web/app.ts", "web/app.css"])
    ctx = ToolContext.on_disk(root)
    assert (await run(GlobTool(backend), ctx, pattern="*.{js,ts}")).text.splitlines() == ["web/app.ts", "web/app.js"]
    res = await run(GrepTool(backend), ctx, pattern="needle", glob="web/*.{js,ts}")
    assert res.text.splitlines() == ["web/app.js:1: needle", "web/app.ts:1: needle"]


def test_rg_is_found_without_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    find_rg.cache_clear()
    try:
        assert find_rg() is not None
    finally:
        find_rg.cache_clear()


async def test_grep_in_a_14_mb_minified_line_froze_on_its_800_000_matches(tmp_path, backend):
    root = tmp_path / "big"
    root.mkdir()
    (root / "bundle.min.js").write_text("".join("function f%d(a){return a+%d};" % (i, i) for i in range(400000)))
    res = await run(GrepTool(backend), ToolContext.on_disk(root), pattern="a")
    [line] = res.text.splitlines()
    assert line.startswith("bundle.min.js:1: function f0(a){return a+0};") and len(line) < 700
    assert line.endswith("[long line: 14,577,780 characters, showing 1-500; 799,999 more matches in this line]")


async def test_grep_window_in_a_long_line_is_placed_by_characters_not_bytes(tmp_path, backend):
    root = tmp_path / "wide"
    root.mkdir()
    (root / "w.txt").write_text("é" * 300_000 + "needle" + "x" * 10 + "needle" + "x" * 1000 + "\nneedle\n")
    res = await run(GrepTool(backend), ToolContext.on_disk(root), pattern="needle")
    first, second = res.text.splitlines()
    assert first.startswith("w.txt:1: …" + "é" * 150 + "needlexxxxxxxxxxneedle")
    assert f"showing {300_000 - 150 + 1:,}-{300_000 - 150 + 500:,}; 1 more matches in this line]" in first
    assert second == "w.txt:2: needle"


async def test_grep_where_rg_wrote_a_record_over_the_limit_failed_the_whole_search(tmp_path, monkeypatch):
    from agent_server.tools import _rg

    monkeypatch.setattr(_rg, "RECORD_LIMIT", 1024 * 1024)  # as a 100 MB line does with the real 64 MiB
    root = tmp_path / "huge"
    root.mkdir()
    (root / "a.min.js").write_text("needle;" * 400_000 + "\n")  # a 2.8 MB line: its record is over 1 MiB
    (root / "b.txt").write_text("one needle\n")
    res = await run(GrepTool("rg"), ToolContext.on_disk(root), pattern="needle")
    assert not res.is_error, res.text
    lines = res.text.splitlines()
    assert lines[0] == "b.txt:1: one needle" and res.meta["count"] == 1
    assert "1 matching line(s) too long to read were left out" in res.text


@pytest.mark.parametrize("how", ["listed", "rules"])
async def test_grep_said_whether_a_hidden_secret_matched_the_pattern_either_backend(tmp_path, backend, how):
    """Finding 13 (both backends): a secret-named file is not searched at all — also when a cloned
    repository's ``.gitignore``/``.ignore``/``.rgignore`` un-ignores it or names it ``*.pem`` in a folder,
    when it is named in capitals, or reached through a link — and the note is the same whether the
    pattern would match inside it or not. ``listed``: the files listed and judged by a callable;
    ``rules``: said to the search as rules (``SecretRules``: the server's way)."""
    from agent_server.tools.access import SecretRules

    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "server.pem").write_text('api_key = "sk-live-abc123"\n')
    (tmp_path / "weird [x]*.PEM").write_text('api_key = "sk-live-abc123"\n')
    (tmp_path / "notes.txt").symlink_to(tmp_path / "keys" / "server.pem")
    (tmp_path / ".gitignore").write_text("!*.pem\n")
    (tmp_path / ".ignore").write_text("!*.PEM\n")
    (tmp_path / ".rgignore").write_text("!keys/\n")
    (tmp_path / "app.py").write_text("x = 1\n")
    ctx = ToolContext.on_disk(tmp_path)
    if how == "listed":
        ctx.is_secret = lambda p: p.name.lower().endswith(".pem")
    else:
        ctx.secret_rules = SecretRules(names=("*.pem",))
    shown = []
    for pattern in ("sk-live-abc1", "sk-live-abd"):
        res = await GrepTool(backend).run(validate_args(GrepTool(), json.dumps({"pattern": pattern})), ctx)
        shown.append(res.text.replace(pattern, "P"))
    assert shown[0] == shown[1], shown
    assert "not searched: 2 file(s) that may hold secrets" in shown[0] and "sk-live-abc123" not in shown[0]
    # nothing else to search: the same answer, no ripgrep error
    for name in ("app.py", ".gitignore", ".ignore", ".rgignore", "notes.txt"):
        (tmp_path / name).unlink()
    res = await GrepTool(backend).run(validate_args(GrepTool(), '{"pattern": "sk-live"}'), ctx)
    assert not res.is_error and res.text.startswith("No matches") and "not searched" in res.text, res.text


async def test_secret_paths_and_protected_folders_are_left_out_by_rule_either_backend(tmp_path, backend):
    """What the server's rules leave out of a folder-wide grep without listing its files: a protected
    folder (whole), a secret path glob, a file a credential-path variable names, a secret name in any
    case — whatever the ignore files say — and the search below a pattern's fixed part lists instead."""
    from agent_server.tools.access import FileAccess, SecretRules

    home = tmp_path / "home"
    files = {".ssh/id_test": "needle SSH-MATERIAL", ".aws/credentials": "needle AWS-MATERIAL",
             "proj/conf/prod.key": "needle KEY-MATERIAL", "proj/conf/readme.md": "needle fine",
             "gcp.json": "needle GCP-MATERIAL", "proj/.Env": "needle ENV-MATERIAL", "proj/app.py": "needle ok",
             ".gitignore": "!.ssh/\n!.aws/\n!*.key\n"}
    for rel, text in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text + "\n")
    protected = str(home / ".ssh")
    ctx = ToolContext.on_disk(home)
    ctx.access = FileAccess([home], protected=lambda a, b: "protected" if protected in (a, b) or
                            a.startswith(protected + "/") else None, protected_paths=[protected])
    ctx.secret_rules = SecretRules(names=(".env*",), paths=(str(home / ".aws") + "/**", str(home / "proj/conf/*.key")),
                                   exact=(str(home / "gcp.json"),))
    for path, shown in ((None, ["proj/app.py:1: needle ok", "proj/conf/readme.md:1: needle fine"]),
                        ("proj/conf", ["proj/conf/readme.md:1: needle fine"])):
        res = await run(GrepTool(backend), ctx, pattern="needle", **({"path": path} if path else {}))
        assert res.text.splitlines()[:len(shown)] == shown, res.text
        assert "MATERIAL" not in res.text
    res = await run(GrepTool(backend), ctx, pattern="needle")
    assert "[not searched: protected locations (.ssh: " in res.text, res.text
    assert ("not searched: 2 file(s) that may hold secrets (gcp.json, proj/.Env, and any file matching .aws/**, "
            "and any file matching proj/conf/*.key)") in res.text, res.text


async def test_a_secret_rule_rg_cannot_be_told_lists_and_judges_each_file_either_backend(tmp_path, backend):
    """A rule ``rg`` cannot take (a path glob whose fixed part lies above the searched folder, a name
    glob with a colon) falls back to listing the files and judging each by the same rules."""
    from agent_server.tools.access import SecretRules

    proj = tmp_path / "proj"
    (proj / "deploy").mkdir(parents=True)
    (proj / "deploy" / "prod.json").write_text("needle DEPLOY-MATERIAL\n")
    (proj / "a:b.txt").write_text("needle COLON-MATERIAL\n")
    (proj / "app.py").write_text("needle ok\n")
    ctx = ToolContext.on_disk(proj)
    ctx.secret_rules = SecretRules(names=("*:*",), paths=(str(tmp_path) + "/**/deploy/*.json",))
    res = await run(GrepTool(backend), ctx, pattern="needle")
    assert res.text.startswith("app.py:1: needle ok"), res.text
    assert "not searched: 2 file(s) that may hold secrets (a:b.txt, deploy/prod.json)" in res.text, res.text
    assert "MATERIAL" not in res.text


@pytest.mark.parametrize("pattern", [".env*", "*.pem", "id_[rd]sa?", "[!x]*.key", "a{b}*", "x]y", "br[ac", "*\\*",
                                     "ü*.Crt", "[a-c]*.txt", "!bang*"])
def test_a_secret_name_glob_left_out_by_rg_the_same_files_fnmatch_names_in_any_case(tmp_path, pattern):
    """``any_case_glob`` turns each ``fnmatch`` name glob into the ``rg`` glob ``--type-not`` leaves
    out: the same names, in any case, and no ``rg`` error for braces, brackets or backslashes."""
    import fnmatch
    import subprocess

    from agent_server.tools._scope import any_case_glob

    names = [".env", ".ENV.local", "x.pem", "X.PEM", "id_rsa1", "ID_DSAX", "akey.key", "x.key", "a{b}c", "A{B}",
             "x]y", "X]Y", "br[ac", "BR[AC", "a\\*", "ü1.crt", "Ü1.CRT", "b.txt", "D.txt", "!bang", "!BANG1", "plain"]
    for name in names:
        (tmp_path / name).write_text("x\n")
    out = subprocess.run([find_rg(), "--no-config", "--hidden", "--files", f"--type-add=s:{any_case_glob(pattern)}",
                          "--type=s"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    expected = {n for n in names if fnmatch.fnmatch(n.lower(), pattern.lower())}
    assert set(out.stdout.split()) == expected, (any_case_glob(pattern), expected)
