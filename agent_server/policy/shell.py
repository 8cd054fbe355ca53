"""Reading a shell command the way policy needs: is it compound, what is its prefix, is it
destructive, does it name a secret file.

Role: ``analyze(command)`` splits a ``bash -c`` string into its simple commands (quotes, escapes,
``$(…)``, backticks, process substitution and redirections understood, substitutions analysed
recursively) and says whether it is *compound* (``&&``, ``||``, ``;``, ``|``, ``&``, newlines,
subshells, ``$(…)``, backticks). ``command_prefix`` gives the words an ``allow_always`` remembers
(``pytest``, ``npm test``, ``git status``, ``python -m pytest``), ``None`` when the command may never
be remembered; ``destructive_reason`` names why a command is destructive (``rm -r``, ``git reset
--hard`` …); ``secret_words`` lists the words that look like paths, for the secret-file check.

Must never: be mistaken for a boundary. This is a *safety net* that asks the user; a command it
misreads is still confined by the OS sandbox (or was asked about because there is none). When in
doubt it answers the cautious way: compound, not rememberable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

_OPERATOR_CHARS = ";&|()\n"
_SUBCOMMAND_TOOLS = frozenset({
    "git", "npm", "pnpm", "yarn", "bun", "cargo", "go", "docker", "podman", "kubectl", "pip", "pip3",
    "uv", "poetry", "make", "dotnet", "mvn", "gradle", "rustup", "conda", "brew", "apt", "apt-get",
    "systemctl", "gh", "terraform", "helm", "deno", "npx", "hatch", "tox", "nox", "just", "composer",
})
_RUNNERS = frozenset({"run", "exec", "x", "dlx", "compose", "run-script"})
_INTERPRETER = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|node|ruby|perl|php|bash|sh|zsh|dash|fish|lua|Rscript)$")
_WRAPPERS = frozenset({"sudo", "doas", "env", "command", "builtin", "exec", "nohup", "nice", "ionice", "time",
                       "timeout", "stdbuf", "xargs", "chronic", "unbuffer", "watch", "setsid", "su", "strace"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
_SUBCOMMAND_WORD = re.compile(r"^[a-z][a-z0-9._:-]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass
class Analysis:
    """What ``analyze`` found.

    ``commands``: the words of each simple command (quotes removed), substitutions' included;
    ``compound``: more than one command can run; ``redirect_targets``: files written or read by
    redirection (fd duplications and ``/dev/null`` excluded); ``assignments``: a command starts
    with ``VAR=value``; ``error``: unbalanced quotes or parentheses (then treat it as compound).
    """

    commands: list[list[str]] = field(default_factory=list)
    compound: bool = False
    redirect_targets: list[str] = field(default_factory=list)
    assignments: bool = False
    error: bool = False

    @property
    def simple(self) -> bool:
        """One plain command: no operators, substitutions, file redirections or assignments."""
        return not (self.compound or self.error or self.redirect_targets or self.assignments) and len(self.commands) == 1


def _matching(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the ``close`` matching the ``open_`` before ``i`` (quotes respected); -1."""
    depth, quote = 1, ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def analyze(command: str) -> Analysis:
    """Split ``command`` into simple commands and flags (see ``Analysis``)."""
    out = Analysis()
    words: list[str] = []
    word: list[str] | None = None
    pending_redirect: str | None = None

    def end_word() -> None:
        nonlocal word, pending_redirect
        if word is None:
            return
        text = "".join(word)
        word = None
        if pending_redirect is not None:
            op, pending_redirect = pending_redirect, None
            if not ((op.endswith("&") and re.fullmatch(r"\d+-?|-", text)) or text == "/dev/null"):
                out.redirect_targets.append(text)
            return
        if not words and _ASSIGNMENT.match(text):
            out.assignments = True
            return
        words.append(text)

    def end_command() -> None:
        nonlocal words
        end_word()
        if words:
            out.commands.append(words)
        words = []

    def substitution(inner: str) -> None:
        out.compound = True
        nested = analyze(inner)
        out.commands.extend(nested.commands)
        out.redirect_targets.extend(nested.redirect_targets)
        out.error = out.error or nested.error

    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if c == "\\":
            if i + 1 < n and command[i + 1] == "\n":
                i += 2
                continue
            word = (word or []) + [command[i + 1] if i + 1 < n else ""]
            i += 2
            continue
        if c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                out.error = True
                break
            word = (word or []) + [command[i + 1:end]]
            i = end + 1
            continue
        if c == '"':
            j, buf = i + 1, []
            while j < n and command[j] != '"':
                if command[j] == "\\" and j + 1 < n:
                    buf.append(command[j + 1])
                    j += 2
                    continue
                if command.startswith("$(", j) or command[j] == "`":
                    close = _matching(command, j + 2, "(", ")") if command[j] == "$" else command.find("`", j + 1) + 1
                    if close <= 0:
                        out.error = True
                        break
                    substitution(command[j + 2:close - 1] if command[j] == "$" else command[j + 1:close - 1])
                    buf.append(command[j:close])
                    j = close
                    continue
                buf.append(command[j])
                j += 1
            if out.error or j >= n:
                out.error = True
                break
            word = (word or []) + ["".join(buf)]
            i = j + 1
            continue
        if command.startswith("$(", i) or command.startswith("<(", i) or command.startswith(">(", i):
            close = _matching(command, i + 2, "(", ")")
            if close < 0:
                out.error = True
                break
            substitution(command[i + 2:close - 1])
            word = (word or []) + [command[i:close]]
            i = close
            continue
        if c == "`":
            close = command.find("`", i + 1)
            if close < 0:
                out.error = True
                break
            substitution(command[i + 1:close])
            word = (word or []) + [command[i:close + 1]]
            i = close + 1
            continue
        if c == "#" and word is None:
            end = command.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "<>" or (c == "&" and command.startswith(">", i + 1)):
            fd = "".join(word) if word is not None and "".join(word).isdigit() else None
            if fd is not None:
                word = None
            end_word()
            m = re.match(r"&>>?|>>|>\||>&|<<<|<<-?|<&|<>|>|<", command[i:])
            op = m.group(0) if m else c
            pending_redirect = op
            i += len(op)
            while i < n and command[i] in " \t":
                i += 1
            continue
        if c in _OPERATOR_CHARS:
            out.compound = True
            end_command()
            i += 1
            continue
        if c in " \t":
            end_word()
            i += 1
            continue
        word = (word or []) + [c]
        i += 1
    end_command()
    if pending_redirect is not None:
        out.error = True
    return out


def _base(word: str) -> str:
    return os.path.basename(word)


def _strip_wrappers(words: list[str]) -> list[str]:
    """The command under ``sudo``/``env``/``timeout 10``/``xargs -0``… (options and values skipped)."""
    i = 0
    while i < len(words) and _base(words[i]) in _WRAPPERS:
        i += 1
        while i < len(words) and (words[i].startswith("-") or _ASSIGNMENT.match(words[i])
                                  or re.fullmatch(r"[0-9.]+[smhd]?", words[i])):
            i += 1
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        i += 1
    return words[i:]


def command_prefix(command: str) -> str | None:
    """The words an ``allow_always`` remembers for ``command``, or ``None`` when it may never be
    remembered (compound, redirections to files, ``VAR=`` prefixes, wrappers such as ``sudo``,
    inline code such as ``python -c``, destructive commands).

    ``pytest -k x`` → ``pytest``; ``npm test`` → ``npm test``; ``npm run build`` → ``npm run build``;
    ``git status --short`` → ``git status``; ``python -m pytest -q`` → ``python -m pytest``.
    """
    found = analyze(command)
    if not found.simple or destructive_reason(command):
        return None
    return _prefix_words(found.commands[0])


def _prefix_words(words: list[str]) -> str | None:
    head = _base(words[0])
    if head in _WRAPPERS:
        return None
    if _INTERPRETER.match(head):
        if len(words) >= 3 and words[1] == "-m" and not words[2].startswith("-"):
            return " ".join(words[:3])
        if len(words) >= 2 and not words[1].startswith("-"):
            return " ".join(words[:2])  # an interpreter with its script
        return None  # inline code (-c, -e) or an interactive interpreter
    if head in _SUBCOMMAND_TOOLS and len(words) >= 2:
        if not _SUBCOMMAND_WORD.match(words[1]):
            return None if words[1].startswith("-") else words[0]
        if words[1] in _RUNNERS and len(words) >= 3 and not words[2].startswith("-"):
            return " ".join(words[:3])
        return " ".join(words[:2])
    return words[0]


#: Programs that can run code (or other programs) named in their own arguments, so a prefix rule
#: for them would allow anything: ``awk 'BEGIN{system("…")}'``, ``sed 'e …'``, ``tar
#: --checkpoint-action=exec=…``, ``find -exec``, ``xargs``, ``env``, ``git -c core.pager=…`` (git
#: only with options before its subcommand or one of ``GIT_CODE_SUBCOMMANDS``/``GIT_CODE_OPTIONS``),
#: interpreters and shells, ``make --eval``, ``rsync -e``, ``ssh host cmd``, editors with ``-c``,
#: pagers, ``zip -TT``, ``parallel``, ``watch``, ``timeout``/``nice``-style wrappers. An
#: ``allow_always`` for one of them remembers the exact command only.
CODE_FROM_ARGUMENTS = frozenset({
    "awk", "gawk", "mawk", "nawk", "busybox", "sed", "gsed", "tar", "gtar", "bsdtar", "find", "gfind", "xargs",
    "env", "make", "gmake", "rsync", "ssh", "scp", "sftp", "vim", "vi", "nvim", "ex", "emacs", "less",
    "more", "man", "zip", "unzip", "parallel", "watch", "timeout", "nice", "ionice", "nohup", "setsid", "stdbuf",
    "sudo", "doas", "su", "strace", "ltrace", "gdb", "expect", "script", "flock", "chroot", "unshare", "nsenter",
    "dpkg", "rpm", "npx", "bunx", "pnpx", "docker", "podman", "kubectl", "jq", "yq", "m4", "dc", "bc", "ed",
    "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "Rscript", "R", "tclsh", "wish",
    "osascript", "pwsh", "powershell", "java", "jshell", "groovy", "scala", "julia", "guile", "racket", "sbcl",
})


#: git subcommands that run a program named in their arguments (``rebase --exec``, ``bisect run``,
#: ``submodule foreach`` …) or write configuration that does (``config alias.x '!cmd'``).
GIT_CODE_SUBCOMMANDS = frozenset({"rebase", "bisect", "submodule", "difftool", "mergetool", "filter-branch",
                                  "filter-repo", "config", "daemon", "instaweb", "send-email", "archimport",
                                  "cvsimport", "svn", "p4", "web--browse", "credential", "hook", "am", "apply",
                                  "fetch", "pull", "push", "clone", "ls-remote", "remote", "archive"})
#: git options that name a program to run.
GIT_CODE_OPTIONS = ("-O", "--open-files-in-pager", "--ext-diff", "-x", "--exec", "--extcmd", "-t", "--tool",
                    "--upload-pack", "--receive-pack", "-u", "--run", "--textconv", "--config", "-c")


def _git_runs_code(args: list[str]) -> bool:
    if not args or args[0].startswith("-"):
        return True  # `git -c core.pager=… log`, `git --exec-path=…`, `git -C dir …`
    if args[0] in GIT_CODE_SUBCOMMANDS:
        return True
    return any(a == o or a.startswith(o + "=") or (len(o) == 2 and a.startswith(o) and not a.startswith("--"))
               for a in args[1:] for o in GIT_CODE_OPTIONS)


def runs_code_from_arguments(command: str) -> str | None:
    """The program of ``command`` that can run code from its arguments (``CODE_FROM_ARGUMENTS``,
    interpreters and shells included), or ``None``. Any simple command of a compound one counts;
    an unparsable command counts as such (``"?"``)."""
    found = analyze(command)
    if found.error or not found.commands:
        return "?" if found.error else None
    for words in found.commands:
        head = _base(words[0])
        if head in CODE_FROM_ARGUMENTS or head in _SHELLS or _INTERPRETER.match(head):
            return head
        if head == "git" and _git_runs_code(words[1:]):
            return "git"
    return None


def prefix_matches(prefix: str, command: str) -> bool:
    """Whether a remembered ``prefix`` covers ``command``: a simple command whose leading words
    are the prefix's words."""
    found = analyze(command)
    if not found.simple:
        return False
    want = prefix.split(" ")
    return found.commands[0][: len(want)] == want


def _short_flags(words: list[str]) -> str:
    return "".join(w[1:] for w in words if re.fullmatch(r"-[A-Za-z]+", w))


def _git_reason(args: list[str]) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    if i >= len(args):
        return None
    sub, rest = args[i], args[i + 1:]
    flags = _short_flags(rest)
    if sub == "reset" and "--hard" in rest:
        return "`git reset --hard` discards uncommitted changes"
    if sub == "clean" and not ("-n" in rest or "--dry-run" in rest or "n" in flags):
        return "`git clean` deletes untracked files"
    if sub == "checkout" and ("--" in rest or "." in rest or "-f" in rest or "--force" in rest):
        return "`git checkout -- …` discards uncommitted changes"
    if sub == "restore" and not ("--staged" in rest and "--worktree" not in rest and "W" not in flags):
        return "`git restore` discards uncommitted changes"
    if sub == "push" and (any(w.startswith("--force") or w in ("-f", "--mirror", "--delete", "-d") for w in rest)
                          or "f" in flags or any(w.startswith(("+", ":")) for w in rest)):
        return "a forced or deleting `git push` rewrites the remote"
    if sub == "branch" and ("D" in flags or ({"-d", "--delete"} & set(rest) and {"-f", "--force"} & set(rest))):
        return "`git branch -D` deletes a branch with unmerged work"
    if sub == "stash" and rest[:1] in (["drop"], ["clear"]):
        return "`git stash drop/clear` deletes stashed work"
    if sub in ("filter-branch", "filter-repo") or (sub == "reflog" and rest[:1] in (["expire"], ["delete"])):
        return f"`git {sub}` rewrites history"
    if sub == "update-ref" and "-d" in rest:
        return "`git update-ref -d` deletes a ref"
    return None


def _words_reason(words: list[str], depth: int) -> str | None:
    if words and _base(words[0]) in _WRAPPERS:  # `sudo -u bob rm -rf x`: try every plausible start
        for k in range(1, len(words)):
            if _base(words[k]) not in _WRAPPERS:
                reason = _one_reason(words[k:], depth)
                if reason:
                    return reason
        return None
    return _one_reason(_strip_wrappers(words), depth)


def _one_reason(words: list[str], depth: int) -> str | None:
    if not words:
        return None
    head, args = _base(words[0]), words[1:]
    flags = _short_flags([a for a in args if a != "--"])
    if head == "rm" and ("r" in flags or "R" in flags or "--recursive" in args):
        return "`rm -r` deletes a folder tree"
    if head == "git":
        return _git_reason(args)
    if head == "find" and ("-delete" in args or any(a in ("-exec", "-execdir", "-ok") and i + 1 < len(args)
                                                   and _base(args[i + 1]) in ("rm", "shred")
                                                   for i, a in enumerate(args))):
        return "`find` with `-delete`/`-exec rm` deletes files"
    if head in ("shred", "wipefs", "fdisk", "sfdisk", "parted") or head.startswith("mkfs"):
        return f"`{head}` destroys data"
    if head == "dd" and any(a.startswith("of=") for a in args):
        return "`dd of=…` overwrites its target"
    if head == "truncate":
        return "`truncate` cuts files"
    if head in ("chmod", "chown", "chgrp") and ("R" in flags or "--recursive" in args):
        return f"`{head} -R` changes a whole tree"
    if head == "rsync" and any(a.startswith("--delete") for a in args):
        return "`rsync --delete` deletes files"
    if depth < 3 and head in _SHELLS and "-c" in args[:-1]:
        return destructive_reason(args[args.index("-c") + 1], depth + 1)
    if depth < 3 and head == "eval":
        return destructive_reason(" ".join(args), depth + 1)
    return None


def destructive_reason(command: str, depth: int = 0) -> str | None:
    """Why ``command`` is destructive (asks even under the sandbox), or ``None``.

    Covers ``rm -r``/``-rf``, ``git reset --hard``, ``git clean``, ``git checkout -- …``,
    ``git restore``, forced/deleting ``git push``, ``git branch -D``, ``git stash drop/clear``,
    history rewrites, ``find -delete``, ``shred``/``mkfs``/``dd of=``/``truncate``, recursive
    ``chmod``/``chown``, ``rsync --delete``, also behind ``sudo``/``xargs``/``bash -c``/``eval``.
    """
    for words in analyze(command).commands:
        reason = _words_reason(words, depth)
        if reason:
            return reason
    return None


def path_words(command: str) -> list[str]:
    """Words of ``command`` that may name files (arguments, ``--opt=value`` values, redirection
    targets), for the secret-file check."""
    found = analyze(command)
    out: list[str] = list(found.redirect_targets)
    for words in found.commands:
        for word in words[1:]:
            value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
            if value and not value.startswith("-"):
                out.append(value)
    return out
