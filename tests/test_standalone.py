"""The repository stands on its own: nothing in it names a path outside it, and every document the
README links is in it (issue: a fresh clone failed 15 tests + 82 errors reading ``../shared``)."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Ways a file could reach outside the clone: the steering folder beside it, this machine's absolute
# checkout paths, the old environment variable that pointed at shared/, or climbing past the root.
_OUTSIDE = re.compile(r"\.\./shared|/work/(main|shared)|AGENT_SERVER_SHARED|parents\[\d\]\.parent")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_names_a_path_outside_the_repository():
    offenders = []
    for path in _tracked():
        if "tests/fixtures/" in path.as_posix() or path == Path(__file__).resolve():
            continue  # vendored third-party data; this file spells the patterns it looks for
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert offenders == []


def test_every_document_the_readme_links_exists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = {t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme)}
    local = sorted(t for t in targets if t and not re.match(r"[a-z]+:", t))
    assert "docs/protocol.md" in local and "docs/architecture.md" in local
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == []


def test_fixtures_the_tests_use_are_vendored():
    from support.paths import ACP_SCHEMA, ACP_SCHEMA_UNSTABLE, FILES_DIR, SSE_DIR

    assert (SSE_DIR / "expected.json").is_file()
    assert len(list(SSE_DIR.glob("*.txt"))) >= 8
    assert (FILES_DIR / "agents_md").is_dir()
    assert ACP_SCHEMA.is_file() and ACP_SCHEMA_UNSTABLE.is_file()
    for folder in (SSE_DIR, FILES_DIR, ACP_SCHEMA.parent):
        assert folder.resolve().is_relative_to(ROOT)


def test_no_readme_names_a_document_the_repository_does_not_have():
    """bench/README.md and clients/vscode/README.md named ``PROTOCOL.md`` (it is docs/protocol.md):
    every relative link of a tracked markdown file resolves, and every ``NAME.md`` it names exists."""
    tracked = [p for p in _tracked() if p.suffix == ".md" and "tests/fixtures/" not in p.as_posix()]
    names = {p.name for p in _tracked()} | {"AGENTS.md", "CLAUDE.md"}  # files the agent reads in a project
    problems = []
    for path in tracked:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            target = target.split("#", 1)[0]
            if target and not re.match(r"[a-z]+:", target) and not (path.parent / target).exists():
                problems.append(f"{path.relative_to(ROOT)}: link {target}")
        for name in set(re.findall(r"(?<![\w/.-])([A-Z][A-Z_]+\.md)\b", text)):
            if name not in names:
                problems.append(f"{path.relative_to(ROOT)}: names {name}")
    assert problems == []


def test_vscode_readme_has_no_relative_link_the_packaged_readme_would_break():
    """vsce packages clients/vscode/README.md into the .vsix and, without a repository URL, refused a
    relative link (setup-vscode.sh stopped: "The link '../../docs/protocol.md' will be broken"). It now
    packages with --no-rewrite-relative-links, so a relative link must name a file of the extension's
    folder that the .vsix carries (its screenshots in docs/), never one outside it."""
    ext = ROOT / "clients" / "vscode"
    readme = (ext / "README.md").read_text(encoding="utf-8")
    relative = [t for t in re.findall(r"\]\(([^)\s]+)\)", readme) if not re.match(r"[a-z]+:|#", t)]
    packaged = [line[1:].strip() for line in (ext / ".vscodeignore").read_text().splitlines() if line.startswith("!")]
    broken = [t for t in relative if t.startswith(("/", "..")) or not (ext / t).is_file()
              or not any(fnmatch.fnmatch(t, pattern.replace("/**", "/*")) for pattern in packaged)]
    assert broken == [], f"relative links the packaged README would break: {broken}"
