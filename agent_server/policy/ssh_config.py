"""The private keys the user's OpenSSH configuration names, wherever they are.

Role: ``identity_files(home, env)`` reads ``~/.ssh/config`` and ``/etc/ssh/ssh_config`` (and every file
their ``Include`` lines name, as ssh does: globs, ``~``, a relative name taken from ``~/.ssh`` in the
user's file and from ``/etc/ssh`` in the system's) and gives every ``IdentityFile`` of every ``Host``
and ``Match`` block: ``~/keys/work.pem``, ``"%d/My Keys/id"``, ``${KEYS}/deploy``. ``~``, ``%d``,
``%u``, ``%i``, ``%%`` and ``${VAR}`` are expanded as ssh expands them; a token that depends on the
host ssh connects to (``%h``, ``%r``, ``%n``, ``%p``, ``%C`` …) is taken as any name (``*``) and
the existing files that fit are given. Policy makes these files protected, as the keys in ``~/.ssh``.

Must never: open a key file (only the configuration files are read, each a regular file of at most
``MAX_CONFIG_BYTES``, opened without blocking: an ``Include`` naming a FIFO or a device is skipped),
or follow more than ``MAX_DEPTH`` levels of ``Include`` (ssh's own limit). Known limits: ssh's
``Match exec`` and the host a block applies to are not evaluated (every block counts). A relative
``IdentityFile`` is, for ssh, relative to the folder ssh runs in (``tilde_expand`` leaves it as it is
and ssh opens it from its working folder): it is taken from the home folder (a terminal's usual
one) and from each ``workdirs`` (the workspace roots: the agent's shell starts there) — not from
any other folder a command ``cd``s to.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence

#: ``Include`` depth ssh allows (``READCONF_MAX_DEPTH``).
MAX_DEPTH = 16
#: A configuration file larger than this is not read.
MAX_CONFIG_BYTES = 1 << 20
#: Files one host-dependent ``IdentityFile`` glob may give, at most.
MAX_GLOB_FILES = 200
_TOKEN = re.compile(r"%(.)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_GLOB = re.compile(r"[*?\[]")


def split_words(line: str) -> list[str]:
    """The words of a configuration line as ssh splits them (``argv_split``): runs of spaces or tabs
    separate words, ``"…"`` and ``'…'`` quote, ``\\`` escapes a quote, a backslash or a space; an
    unquoted ``#`` starts a comment. The first word may end in ``=`` or be followed by one
    (``IdentityFile=~/k``)."""
    words: list[str] = []
    word: list[str] = []
    quote = ""
    started = False
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and i + 1 < len(line) and line[i + 1] in (quote, "\\"):
                word.append(line[i + 1])
                i += 2
                continue
            if c == quote:
                quote = ""
            else:
                word.append(c)
        elif c in " \t\r\n":
            if started:
                words.append("".join(word))
                word, started = [], False
        elif c == "#" and not started:
            break
        elif c in "\"'":
            quote, started = c, True
        elif c == "\\" and i + 1 < len(line) and line[i + 1] in "\"'\\ ":
            word.append(line[i + 1])
            started = True
            i += 1
        else:
            word.append(c)
            started = True
        i += 1
    if started:
        words.append("".join(word))
    if words and "=" in words[0]:  # ``Keyword=value`` (no space around ``=``)
        key, _, rest = words[0].partition("=")
        words[:1] = [key, rest] if rest else [key]
    elif len(words) > 1 and words[1].startswith("="):  # ``Keyword = value`` / ``Keyword =value``
        rest = words[1][1:]
        words[1:2] = [rest] if rest else []
    return words


def _read(path: str) -> str | None:
    """The text of the regular file ``path`` (``None``: missing, not a regular file, too big)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CONFIG_BYTES:
            return None
        return os.read(fd, MAX_CONFIG_BYTES + 1).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


class _Expander:
    def __init__(self, home: str, env: Mapping[str, str]) -> None:
        self.home = home
        self.env = env
        self.user = env.get("USER") or env.get("LOGNAME") or ""
        if not self.user:
            try:
                import pwd

                self.user = pwd.getpwuid(os.getuid()).pw_name
            except (ImportError, KeyError):
                self.user = ""

    def tilde(self, path: str) -> str:
        if path == "~" or path.startswith("~/"):
            return self.home + path[1:]
        return path

    def tokens(self, text: str) -> str:
        """``text`` with ``%d %u %i %%`` and ``${VAR}`` expanded and the host's tokens made ``*``
        (the literal text around them glob-escaped)."""
        out: list[str] = []
        pos = 0
        for m in _TOKEN.finditer(text):
            out.append(_escape(text[pos:m.start()]))
            token, variable = m.group(1), m.group(2)
            if variable is not None:
                out.append(_escape(self.env.get(variable, "")))
            elif token == "%":
                out.append("%")
            elif token == "d":
                out.append(_escape(self.home))
            elif token == "u":
                out.append(_escape(self.user))
            elif token == "i":
                out.append(str(os.getuid()))
            else:
                out.append("*")
            pos = m.end()
        out.append(_escape(text[pos:]))
        return "".join(out)


def _escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _expand(pattern: str) -> list[str]:
    """The existing paths a glob ``pattern`` names (itself, unescaped, when it holds no glob)."""
    if not _GLOB.search(re.sub(r"\[[*?\[]\]", "", pattern)):
        return [re.sub(r"\[([*?\[])\]", r"\1", pattern)]
    import glob  # deferred: rare (a host-dependent token or a glob in ``Include``)

    return sorted(glob.glob(pattern))[:MAX_GLOB_FILES]


def identity_files(home: str | None = None, env: Mapping[str, str] | None = None,
                   system: str = "/etc/ssh/ssh_config", workdirs: Sequence[str] = ()) -> list[str]:
    """The absolute paths of every ``IdentityFile`` the user's and the system's ssh configuration
    name (see the module docstring), each once, in order; ``none`` is not a file. A relative one
    counts in the home folder and in each of ``workdirs`` (folders ssh may run in)."""
    env = os.environ if env is None else env
    home = home or env.get("HOME") or os.path.expanduser("~")
    ex = _Expander(home, env)
    found: list[str] = []
    seen: set[str] = set()

    def read(path: str, user: bool, depth: int) -> None:
        real = os.path.realpath(path)
        if depth > MAX_DEPTH or real in seen:
            return
        seen.add(real)
        text = _read(path)
        if text is None:
            return
        for line in text.splitlines():
            words = split_words(line)
            if len(words) < 2:
                continue
            key = words[0].lower()
            if key == "include":
                for arg in words[1:]:
                    arg = ex.tilde(arg)
                    if not os.path.isabs(arg):
                        arg = os.path.join(os.path.join(home, ".ssh") if user else os.path.dirname(system), arg)
                    for included in _expand(ex.tokens(arg)) if "%" in arg or "${" in arg else _expand(arg):
                        read(included, user, depth + 1)
            elif key == "identityfile" and words[1].lower() != "none":
                arg = ex.tilde(words[1])
                pattern = ex.tokens(arg)
                bases = [""] if pattern.startswith("/") else [home, *workdirs]  # relative: ssh's working folder
                for base in bases:
                    for path in _expand(os.path.join(_escape(base), pattern) if base else pattern):
                        path = os.path.normpath(path)
                        if path not in found:
                            found.append(path)

    read(os.path.join(home, ".ssh", "config"), True, 0)
    read(system, False, 0)
    return found
