"""Path policy: where a path argument really points, whether that is inside the roots, and
whether it is a secret.

Role: ``target(raw, roots)`` gives the path a file tool acts on (the same lexical join the tools
use) and its fully resolved form (every symlink, at every component, followed — which also
undoes ``/proc/self/root/…`` and ``/proc/self/cwd/…``); ``inside_roots`` decides containment by
*file identity* (device and inode of the nearest existing ancestor), so case-folding or
Unicode-normalising filesystems and bind mounts cannot make an inside path look outside or the
reverse; ``SecretMatcher`` matches the configured secret-file patterns against both the lexical
and the resolved path.

Must never: decide on the path as written. A path is judged only after resolution.

``CredentialStores`` names the places no file tool may open at all, in any mode: the config
folder (it may hold ``api_key``), keyrings, the state folder (every session's log) except this
session's spill and temp folders, and the user's credential files (``~/.ssh``, ``~/.aws``,
``~/.netrc``, ``~/.config/gh`` …).

Known limits: a *hard link* inside a root to a file outside it shares that file's inode; the file
tools replace a file by renaming a new one over its name, so a write does not change the outside
file, but a *read* through such a link shows it (the decision records ``links`` > 1). A symlink
swapped between this check and the open (a race) is outside what a check can see: the file tools
resolve once, must reach the resolution policy decided on (``SessionPolicy.open_refusal``) and then
open with no link-following (``tools.safe_fs``), so the swap makes the operation fail instead of
landing elsewhere.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from agent_server.config.load import DEFAULT_SECRET_PATTERNS

# Pattern syntax: no ``/`` → matched against the file name; with ``/`` → against the whole path
# (``~`` is the home folder, ``**`` any depth, ``*`` within one component).


@dataclass(frozen=True)
class Target:
    """A path argument judged by policy: ``raw`` as the model wrote it, ``lexical`` (absolute,
    ``..`` folded, what the tool opens), ``resolved`` (every symlink followed)."""

    raw: str
    lexical: Path
    resolved: Path


def lexical_path(raw: str, roots: Sequence[Path]) -> Path:
    """The absolute path a tool acts on: ``~`` expanded, relative to ``roots[0]``, ``..``
    folded lexically — exactly ``tools.base.resolve_path``."""
    expanded = os.path.expanduser(raw) if raw.startswith("~") else raw
    return Path(os.path.normpath(os.path.join(roots[0], expanded)))


def resolve(path: Path | str) -> Path:
    """``path`` with every symlink of every existing component followed (the missing tail is
    joined as written). A component that flips between a link and a file while it is resolved
    (``readlink`` fails) is retried; if it keeps flipping, the parent is resolved and the last
    name joined as written (the file tools resolve again and open with no link-following)."""
    for _ in range(8):
        try:
            return Path(os.path.realpath(path))
        except OSError:
            continue
    text = os.path.abspath(path)
    return resolve(os.path.dirname(text)) / os.path.basename(text) if os.path.dirname(text) != text else Path(text)


def target(raw: str, roots: Sequence[Path]) -> Target:
    """Judge ``raw`` against ``roots`` (absolute): its lexical and its resolved path."""
    lexical = lexical_path(raw, roots)
    return Target(raw, lexical, resolve(lexical))


def file_identity(path: Path | str) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path`` (links followed), or ``None`` when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def existing_ancestors(path: Path) -> Iterable[Path]:
    """``path`` (if it exists) and each existing parent, nearest first."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            yield candidate


def inside_roots(path: Path | str, roots: Sequence[Path | str], *, resolved: bool = False) -> bool:
    """Whether ``path`` (absolute), every symlink resolved, is one of ``roots`` or lies beneath one;
    ``resolved``: ``path`` is already the resolution a decision is made on (not resolved again: a
    link swapped meanwhile must not make one decision out of two resolutions).

    Containment is decided by identity: the resolved path's existing ancestors are compared by
    (device, inode) with the resolved roots, so two spellings of one folder (``Work`` and ``work``
    on a case-folding filesystem, NFC and NFD names, a bind mount) are the same folder. A path
    whose ancestors do not exist at all is compared by its resolved text.
    """
    resolved = Path(path) if resolved else resolve(path)
    real_roots = [resolve(r) for r in roots]
    root_ids = {i for i in (file_identity(r) for r in real_roots) if i is not None}
    for ancestor in existing_ancestors(resolved):
        if not ancestor.is_dir() and ancestor != resolved:
            return False  # a missing path under a *file*: it cannot be created anywhere
        if file_identity(ancestor) in root_ids:
            return True
    return any(resolved == r or r in resolved.parents for r in real_roots)


def link_count(path: Path) -> int:
    """Hard-link count of an existing regular file (``0`` if it does not exist)."""
    try:
        st = os.stat(path)
    except OSError:
        return 0
    return st.st_nlink if not os.path.isdir(path) else 0


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """``**`` → any depth, ``*`` → within one component, ``?`` → one character; any case (a
    case-folding filesystem opens ``~/.SSH/id_rsa`` as ``~/.ssh/id_rsa``)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.IGNORECASE)


class SecretMatcher:
    """Matches paths against secret-file patterns (``DEFAULT_SECRET_PATTERNS`` syntax) and the
    files credential-path variables point to.

    ``home``: what ``~`` means (default: the user's home). ``match(path)`` returns the first
    pattern a path matches, else ``None``. Name patterns (no ``/``) match the file name as
    ``fnmatch`` does, in any case (``.ENV``, ``KEY.PEM``: a case-folding filesystem opens them as
    ``.env``, ``key.pem``); they are compiled here, with the path patterns, not by the first
    ``match`` (that is, by the first ``read`` of a process, on its way to the policy decision).
    ``exact``: ``(path, label)`` pairs — a file or folder (and all below it) that is secret
    whatever its name (``credential_variable_paths``); ``label`` is what ``match`` returns for it.

    ``name_patterns``, ``path_patterns`` (``~`` expanded, normalised) and ``exact_paths`` (each
    as given and resolved) say the same to a search that must leave secrets out by rule
    (``tools.base.SecretRules``) rather than by asking about each file.
    """

    def __init__(self, patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS, home: str | None = None,
                 exact: Iterable[tuple[str, str]] = ()) -> None:
        home = home or os.path.expanduser("~")
        self.patterns = tuple(patterns)
        self._names: list[tuple[str, re.Pattern[str]]] = []
        self._paths: list[tuple[str, re.Pattern[str]]] = []
        self.name_patterns: tuple[str, ...] = tuple(p for p in self.patterns if "/" not in p)
        path_patterns: list[str] = []
        for pattern in self.patterns:
            if "/" in pattern:
                expanded = home + pattern[1:] if pattern.startswith("~") else pattern
                self._paths.append((pattern, _glob_regex(os.path.normpath(expanded))))
                path_patterns.append(os.path.normpath(expanded))
                if expanded.endswith("/**"):  # the folder itself is secret too
                    self._paths.append((pattern, _glob_regex(os.path.normpath(expanded[:-3]))))
            else:
                self._names.append((pattern, re.compile(fnmatch.translate(pattern), re.IGNORECASE)))
        self.path_patterns: tuple[str, ...] = tuple(path_patterns)
        self._exact: list[tuple[str, str]] = []
        for path, label in exact:
            for spelling in {os.path.normpath(os.path.abspath(path)), resolve(os.path.abspath(path)).as_posix()}:
                self._exact.append((spelling, label))
        self.exact_paths: tuple[str, ...] = tuple(dict.fromkeys(p for p, _ in self._exact))

    def match(self, *paths: Path | str) -> str | None:
        """The pattern that any of ``paths`` (absolute) matches, or ``None``."""
        for path in paths:
            text = os.path.normpath(str(path))
            for exact, label in self._exact:
                if _under(text, exact):
                    return label
            for pattern, regex in self._paths:
                if regex.match(text):
                    return pattern
            base = os.path.basename(text)
            for pattern, name in self._names:
                if name.match(base):
                    return pattern
        return None


#: The user's credential files and folders (``~`` = home) that no file tool opens, in any mode, and
#: that no confined command sees (``sandbox.shell_masks``): each credential-path variable's default
#: place (a file is no less a credential where its tool keeps it than where a variable moved it), and
#: the token files of the tools an agent's user runs (Hugging Face, Copilot, Codex, Claude, Gemini).
HOME_CREDENTIALS = (
    # ssh, clouds, clusters, infrastructure
    "~/.ssh", "~/.aws", "~/.config/gcloud", "~/.azure", "~/.kube", "~/.oci", "~/.boto", "~/.s3cfg",
    "~/.databrickscfg", "~/.config/doctl", "~/.config/hcloud", "~/.fly", "~/.terraform.d", "~/.terraformrc",
    "~/.vault-token",
    # git hosts, registries, package managers
    "~/.netrc", "~/.git-credentials", "~/.config/git/credentials", "~/.config/gh", "~/.config/hub",
    "~/.config/glab-cli", "~/.docker/config.json", "~/.pypirc", "~/.npmrc", "~/.cargo/credentials",
    "~/.cargo/credentials.toml", "~/.gem/credentials", "~/.composer/auth.json", "~/.config/composer/auth.json",
    "~/.m2/settings-security.xml", "~/.config/rclone",
    # database clients
    "~/.pgpass", "~/.pg_service.conf", "~/.my.cnf", "~/.mylogin.cnf",
    # model hubs and AI tools
    "~/.cache/huggingface/token", "~/.cache/huggingface/stored_tokens", "~/.huggingface/token",
    "~/.kaggle/kaggle.json", "~/.config/github-copilot", "~/.codex/auth.json", "~/.claude/.credentials.json",
    "~/.gemini/oauth_creds.json",
    # password managers, key stores, keyrings
    "~/.gnupg", "~/.password-store", "~/.config/op", "~/.config/sops", "~/.local/share/keyrings",
    "~/.local/share/python_keyring", "~/.config/python_keyring", "~/.local/share/kwalletd",
)

#: Variables that move a folder of ``HOME_CREDENTIALS`` (the XDG base folders, tools' homes): the
#: credential files below the moved folder are protected as below the default one.
CREDENTIAL_HOME_VARIABLES = (
    ("XDG_CONFIG_HOME", "~/.config"), ("XDG_CACHE_HOME", "~/.cache"), ("XDG_DATA_HOME", "~/.local/share"),
    ("HF_HOME", "~/.cache/huggingface"), ("CODEX_HOME", "~/.codex"), ("CLAUDE_CONFIG_DIR", "~/.claude"),
)


#: System files holding password hashes, sudo rules, host and TLS private keys, Kerberos keytabs and
#: saved network passwords: credential stores like ``~/.ssh`` (a server running as root — many
#: containers — can read them). ``*`` stands within one name.
SYSTEM_CREDENTIALS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
    "/etc/security/opasswd", "/etc/master.passwd", "/etc/spwd.db", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
    "/etc/krb5.keytab", "/etc/NetworkManager/system-connections", "/etc/wpa_supplicant/wpa_supplicant.conf",
    "/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets", "/etc/ipsec.secrets", "/etc/letsencrypt/archive",
    "/etc/letsencrypt/keys",
)

#: Files where shells and interpreters keep what was typed, passwords on command lines included
#: (``mysql -pPASSWORD``): secret files (the file tools ask; the confined shell's masks hide them).
HOME_HISTORY = (
    ".bash_history", ".zsh_history", ".zhistory", ".histfile", ".sh_history", ".ksh_history", ".python_history",
    ".mysql_history", ".psql_history", ".node_repl_history", ".sqlite_history", ".lesshst", ".rediscli_history",
    ".irb_history", ".pry_history", ".Rhistory", ".scala_history", ".dbshell", ".gdb_history", ".mongorc_history",
    ".local/share/fish/fish_history", ".config/fish/fish_history", ".ipython/profile_default/history.sqlite",
    ".mongodb/mongosh/mongosh_repl_history",
)


def history_patterns(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Secret path patterns of the history files (``HOME_HISTORY`` under ``~``, and ``$HISTFILE``
    wherever it points): added to the configured ``secret_patterns`` whatever they are."""
    env = os.environ if env is None else env
    out = [f"~/{name}" for name in HOME_HISTORY]
    histfile = (env.get("HISTFILE") or "").strip()
    if histfile and os.path.isabs(os.path.expanduser(histfile)) and not _glob_chars(histfile):
        out.append(os.path.normpath(os.path.expanduser(histfile)))
    return tuple(dict.fromkeys(out))


def secret_patterns_with_history(patterns: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """``patterns`` (the configured ``secret_patterns``) plus ``history_patterns``."""
    return list(dict.fromkeys([*patterns, *history_patterns(env)]))


def _glob_chars(text: str) -> bool:
    return any(c in text for c in "*?[")


#: Variables naming a file or folder that holds credentials, read by the tools
#: of the field (Google Cloud, AWS, Kubernetes, Docker, Azure, gcloud, GnuPG, pass, gh, PostgreSQL,
#: MySQL, curl/git's netrc, rclone, Terraform, OCI, npm, pip, SOPS, Hugging Face, Kaggle, cargo …).
CREDENTIAL_PATH_VARIABLES = (
    "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GHA_CREDS_PATH", "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE",
    "CLOUDSDK_CONFIG", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
    "KUBECONFIG", "KUBE_CONFIG_PATH", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "AZURE_CONFIG_DIR", "GNUPGHOME",
    "PASSWORD_STORE_DIR", "GH_CONFIG_DIR", "NETRC", "PGPASSFILE", "PGSERVICEFILE", "MYSQL_TEST_LOGIN_FILE",
    "RCLONE_CONFIG", "TF_CLI_CONFIG_FILE", "OCI_CLI_CONFIG_FILE", "BOTO_CONFIG", "NPM_CONFIG_USERCONFIG",
    "PIP_CONFIG_FILE", "SOPS_AGE_KEY_FILE", "HF_TOKEN_PATH", "KAGGLE_CONFIG_DIR", "GIT_SSL_KEY", "VAULT_CONFIG_PATH",
)
#: Endings of variable names that name a credential file by convention (Docker's ``*_PASSWORD_FILE``).
CREDENTIAL_PATH_SUFFIXES = ("_CREDENTIALS_FILE", "_CREDENTIALS_PATH", "_KEY_FILE", "_TOKEN_FILE",
                            "_PASSWORD_FILE", "_SECRET_FILE", "_KEYFILE")


def credential_variable_paths(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(absolute path, "$NAME")`` for each file or folder a credential-path variable of ``env``
    (default: the server's environment) points to — ``CREDENTIAL_PATH_VARIABLES`` and names ending
    in ``CREDENTIAL_PATH_SUFFIXES``; ``KUBECONFIG``-style lists split on ``os.pathsep``; ``$CARGO_HOME``
    gives its ``credentials`` files, ``$GIT_SSH_COMMAND``/``$RSYNC_RSH`` the keys their ``-i`` names. A relative value is taken from the server's folder; ``/`` and the
    home folder itself are never named (a misset variable would make every file secret)."""
    env = os.environ if env is None else env
    names = set(CREDENTIAL_PATH_VARIABLES)
    names |= {k for k in env if k.upper().endswith(CREDENTIAL_PATH_SUFFIXES)}
    out: list[tuple[str, str]] = []
    for name in sorted(names):
        for value in (env.get(name) or "").split(os.pathsep):
            path = os.path.abspath(os.path.expanduser(value.strip())) if value.strip() else ""
            if path and path not in ("/", os.path.abspath(os.path.expanduser("~"))):
                out.append((path, f"${name}"))
    for name in ("GIT_SSH_COMMAND", "RSYNC_RSH"):  # ``ssh -i KEY …``: the identity files it names
        if not env.get(name):
            continue
        import shlex  # deferred: not on the server's start-up path (tests/server/test_lazy_imports.py)

        try:
            words = shlex.split(env[name])
        except ValueError:
            words = []
        for i, word in enumerate(words):
            key = words[i + 1] if word == "-i" and i + 1 < len(words) else word[2:] if word.startswith("-i") else ""
            if key:
                out.append((os.path.abspath(os.path.expanduser(key)), f"${name} (-i)"))
    if env.get("CARGO_HOME"):
        out += [(os.path.join(os.path.abspath(env["CARGO_HOME"]), f), "$CARGO_HOME/" + f)
                for f in ("credentials", "credentials.toml")]
    return out


def named_credentials(roots: Iterable[Path | str] = (), env: Mapping[str, str] | None = None,
                      home: str | None = None) -> list[tuple[str, str]]:
    """``(absolute path, label)`` of every file the user's own set-up names as holding credentials:
    what credential-path variables point to (``credential_variable_paths``) and the private keys
    the OpenSSH configuration names (``IdentityFile``, ``policy.ssh_config``; only the configuration
    is read). Protected like the same files at their default places (``~/.aws/credentials``,
    ``~/.ssh/id_ed25519``): a file the user moved is no less a credential. One that is a workspace
    root or a folder above one is left out (a misset variable would close the whole workspace)."""
    from agent_server.policy.ssh_config import identity_files

    env = os.environ if env is None else env
    found = credential_variable_paths(env)
    real_roots = [os.path.realpath(r) for r in roots]
    found += [(path, "~/.ssh/config (IdentityFile)") for path in identity_files(home, env, workdirs=real_roots)]
    out: list[tuple[str, str]] = []
    for path, label in found:
        real = os.path.realpath(path)
        if not any(under_any_case(root, real) for root in real_roots) and (path, label) not in out:
            out.append((path, label))
    return out


def relocated_credentials(env: Mapping[str, str] | None = None) -> list[str]:
    """The ``HOME_CREDENTIALS`` entries below a folder a variable of ``env`` (default: the server's)
    moved (``CREDENTIAL_HOME_VARIABLES``): ``$XDG_CONFIG_HOME/gh``, ``$HF_HOME/token``,
    ``$XDG_DATA_HOME/keyrings`` …; relative values are ignored (as their tools ignore them)."""
    env = os.environ if env is None else env
    out: list[str] = []
    for name, default in CREDENTIAL_HOME_VARIABLES:
        moved = (env.get(name) or "").strip()
        if not moved or not os.path.isabs(moved):
            continue
        for item in HOME_CREDENTIALS:
            if item.startswith(default + "/"):
                out.append(os.path.normpath(os.path.join(moved, item[len(default) + 1:])))
    return list(dict.fromkeys(out))


class CredentialStores:
    """Places the file tools never open (``read``/``grep``/``glob``/``write``/``edit``), in any mode.

    ``config``: agent-server's config file(s) and folder (they may hold ``api_key``);
    ``state_dir``: agent-server's state folder (every session's log, spill files, locks);
    ``session_dir``: this session's folder — its ``spill`` and ``tmp`` sub-folders stay open (the
    model reads its own spilled outputs back, the shell's temp files live in ``tmp``); ``home``:
    what ``~`` means; ``extra``: more paths to protect; ``named``: ``(path, label)`` of credential files
    the user's set-up names (``named_credentials``); ``roots``: the workspace roots — a root that
    lies *inside* a protected folder (the demo's workspace under the state folder) stays open, a
    protected folder inside a root stays protected. ``match(lexical, resolved)`` gives the reason a
    path is protected (either spelling matches), else ``None``.

    ``paths()`` lists every protected path (absolute, resolved where it exists) — what the shell
    sandbox masks too.
    """

    def __init__(self, *, config: Iterable[Path | str | None] = (), state_dir: Path | str | None,
                 session_dir: Path | str | None = None, home: str | None = None,
                 extra: Iterable[Path | str] = (), roots: Iterable[Path | str] = (),
                 named: Iterable[tuple[str, str]] = ()) -> None:
        home = home or os.path.expanduser("~")
        roots = list(roots)
        entries: list[tuple[str, str]] = []
        for item in config:
            if item:
                entries.append((str(item), "it is agent-server's configuration (it may hold the API key)"))
        if state_dir:
            entries.append((str(state_dir), "it is agent-server's state (the logs of every session)"))
        for item in [*(home + h[1:] for h in HOME_CREDENTIALS), *relocated_credentials()]:
            entries.append((item, "it is a credential store (keys, tokens or passwords)"))
        for item in extra:
            entries.append((str(item), "it is protected by agent-server's configuration"))
        for item, label in named:
            entries.append((item, f"it holds credentials (named by {label})"))
        system = "it is a system credential store (password hashes, sudo rules or private keys)"
        self._globs: list[tuple[re.Pattern[str], str]] = []
        for item in SYSTEM_CREDENTIALS:
            if _glob_chars(item):
                self._globs.append((_glob_regex(item), system))
                import glob  # deferred: one pattern, not on the start-up path

                entries += [(found, system) for found in glob.glob(item)]
            else:
                entries.append((item, system))
        self._entries: list[tuple[str, str]] = []
        for path, reason in entries:
            for spelling in {os.path.normpath(os.path.abspath(path)), resolve(os.path.abspath(path)).as_posix()}:
                self._entries.append((spelling, reason))
        self._open: list[str] = []
        if session_dir:
            for sub in ("spill", "tmp"):
                folder = Path(session_dir) / sub
                self._open += list({os.path.normpath(os.path.abspath(folder)), resolve(folder).as_posix()})
        for root in roots:
            for spelling in {os.path.normpath(os.path.abspath(root)), resolve(os.path.abspath(root)).as_posix()}:
                if any(spelling != p and _under(spelling, p) for p, _ in self._entries):
                    self._open.append(spelling)

    def paths(self) -> list[str]:
        """Every protected path, each spelling once, in order."""
        return list(dict.fromkeys(p for p, _ in self._entries))

    def match(self, *paths: Path | str) -> str | None:
        """Why one of ``paths`` (absolute) is protected, or ``None`` (also when it lies in this
        session's open ``spill``/``tmp`` folder)."""
        for path in paths:
            text = os.path.normpath(str(path))
            if any(_under(text, folder) for folder in self._open):
                continue
            for protected, reason in self._entries:
                if _under(text, protected):
                    return reason
            for regex, reason in self._globs:
                if regex.match(text):
                    return reason
        return None


def under_any_case(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it, in any case (a case-folding filesystem — macOS,
    Windows — opens ``~/.SSH`` as ``~/.ssh``; on others the case-variant twin is refused too)."""
    path, folder = path.casefold(), folder.casefold()
    return path == folder or path.startswith(folder.rstrip("/") + "/")


_under = under_any_case


def below_any_case(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder`` when it lies strictly below it (compared in any case), else
    ``None``."""
    base = folder.rstrip("/") + "/"
    return path[len(base):] if len(path) > len(base) and path[:len(base)].casefold() == base.casefold() else None
