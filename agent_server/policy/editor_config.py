"""Editor configuration in the workspace roots that editors execute or obey: read-only to confined
shell commands, and a write by the file tools always asks the user.

Role: ``EDITOR_CONFIG`` names the entries of a workspace root that an editor runs or obeys when it
opens the folder — ``.vscode/`` (settings choosing binaries, tasks, launch configurations),
``.idea/`` (run configurations, external tools), ``.zed/`` (settings, tasks), and Neovim's / Vim's
project files ``.nvim.lua``, ``.nvimrc``, ``.exrc`` (run with 'exrc'). A command that writes one of
them could escape the sandbox through the editor (the next time the editor or its extension reads
it, outside the sandbox), as a write into ``.git/hooks`` could through git; ``.git`` is handled on
its own (``sandbox.py``, ``engine.py``).

Must never: remove anything but an empty folder it made itself; let a placeholder go while another
command still has it mounted (the host-side ``rmdir`` of a mount point detaches that mount in every
other namespace).

The confined shell gets each such path that exists bind-mounted read-only onto itself in its mount
namespace (``ro_binds``, as ``.git``). A bind mount needs an existing target, so for a name that does
not exist yet ``Placeholders`` makes an empty *directory* there for the command's lifetime (a folder
for every name, ``.nvim.lua`` too: a folder blocks creating the file of that name, git does not show
an empty folder, and an editor does not run one), bind-mounted read-only like the others: the command
can neither create the name, nor write into it, nor remove or rename it (a mount point: EBUSY). When
the last confined command holding it ends, the placeholder is removed if it is still empty (the user
may have put something into it meanwhile, from outside the sandbox: then it is theirs and stays).
A server killed mid-command can leave an empty placeholder folder behind; it protects the same way
the next time and holds nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

#: Entries of a workspace root that editors execute or obey (see the module docstring).
EDITOR_CONFIG = (".vscode", ".idea", ".zed", ".nvim.lua", ".nvimrc", ".exrc")


def editor_config_paths(roots: Iterable[Path]) -> list[str]:
    """Each ``root/NAME`` of ``EDITOR_CONFIG`` (resolved, existing or not) that lies inside a root."""
    roots = [Path(os.path.realpath(r)) for r in roots]
    out: list[str] = []
    for root in roots:
        for name in EDITOR_CONFIG:
            path = Path(os.path.realpath(root / name))
            if any(path == r or r in path.parents for r in roots) and str(path) not in out:
                out.append(str(path))
    return out


def editor_config_of(resolved: Path, lexical: Path, roots: Iterable[Path]) -> str | None:
    """The ``EDITOR_CONFIG`` entry (``root/NAME``) that ``resolved`` or ``lexical`` is or lies in, else None."""
    for root in roots:
        for name in EDITOR_CONFIG:
            for base in {Path(os.path.realpath(root / name)), Path(os.path.abspath(root)) / name}:
                for p in (resolved, lexical):
                    if p == base or base in p.parents:
                        return str(Path(root) / name)
    return None


class Placeholders:
    """Empty read-only placeholder folders for the ``EDITOR_CONFIG`` paths that do not exist yet,
    shared (counted) by the confined commands running at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def acquire(self, paths: Iterable[str]) -> list[str]:
        """Makes each missing path of ``paths`` an empty folder (mode 0o755) and holds every one of
        ``paths`` that is a placeholder of ours; returns the held ones (give them to ``release``).
        Raises ``OSError`` when a placeholder cannot be made (the command must then not run)."""
        held: list[str] = []
        with self._lock:
            try:
                for path in paths:
                    if path in self._held:
                        self._held[path] += 1
                        held.append(path)
                        continue
                    if os.path.lexists(path):
                        continue
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    os.mkdir(path, 0o755)
                    self._held[path] = 1
                    held.append(path)
            except OSError:
                self._release_locked(held)
                raise
        return held

    def release(self, held: Iterable[str]) -> None:
        with self._lock:
            self._release_locked(list(held))

    def _release_locked(self, held: list[str]) -> None:
        for path in held:
            left = self._held.get(path, 0) - 1
            if left > 0:
                self._held[path] = left
                continue
            self._held.pop(path, None)
            try:
                os.rmdir(path)  # only if still empty: what the user put there stays
            except OSError:
                pass


#: The server's one set (every launcher of the process shares it: two sessions on one root).
PLACEHOLDERS = Placeholders()
