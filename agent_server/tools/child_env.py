"""The environment every process the tools start gets (issue 11 §1 c): the server's own minus
its settings and its credentials.

Role: ``scrubbed_environ`` is the one place that decides what a child (``rg``, the shell, MCP
servers) inherits: no ``AGENT_SERVER_*`` variable, no variable named in ``drop`` (the configured
``api_key_env``), no variable whose *value* contains one of ``secrets`` (the API key, also when it
is embedded, e.g. ``Bearer sk-…``), and no variable whose name or value says it holds a
credential (``credential_name``: names with SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL,
TOKEN, API_KEY, ACCESS_KEY, PRIVATE_KEY, a ``*_KEY`` ending …; ``credential_value``: a URL with
``user:password@``, a connection string's ``Password=``, a PEM private key) unless the user
allows it by name (``[policy] shell_env_allow``) — issue 32 §9 (``DEEPSEEK_API_KEY``), newcomer
finding 19 (``AWS_SECRET_ACCESS_KEY``, ``PGPASSWORD``, ``DATABASE_URL`` with its password).
``split_environ`` also names what was dropped, for the notice of the first shell call. ``redact`` removes ``secrets`` from text (defence in depth only: an encoding of the
key, e.g. base64, passes).

Must never: return the server's ``os.environ`` itself (a copy is returned); drop a variable
silently when the shell would miss it (the names go into the first shell result).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

#: Shorter "secrets" are not treated as secrets (a dummy ``x`` would mangle every value).
MIN_SECRET_CHARS = 8


#: What a credential's variable name contains (matched in upper case): ``TOKEN`` only as a whole
#: ``_``-separated word or a word's end (``GITHUB_TOKEN``, ``GHTOKEN``, not ``TOKENIZERS_PARALLELISM``);
#: ``*_KEY``/``*_PWD`` only at the end (``OLDPWD``, ``PWD`` and ``*_KEY_ID``-less names stay).
CREDENTIAL_NAME = re.compile(
    r"SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE_?KEY|ACCESS_?KEY|API_?KEY|AUTH_?KEY"
    r"|CONNECTION_?STRING|TOKENS?(?:_|$)|_KEY$|^KEY$|_PWD$|_PASS$|^PGPASS|_COOKIE$")
#: A value that carries a password whatever the variable is called: ``scheme://user:password@`` (a
#: database URL, a proxy with credentials), a connection string's ``Password=``/``AccountKey=``, a
#: PEM private key.
CREDENTIAL_VALUE = re.compile(
    r"://[^/?#@\s:]*:[^/?#@\s]+@|(?:^|;)\s*(?:password|pwd|accountkey|sharedaccesskey)\s*=|PRIVATE KEY-----",
    re.IGNORECASE)
#: Model providers' variables, also those the endings above miss.
PROVIDER_VARIABLES = frozenset({
    "DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GEMINI_API_KEY",
    "GOOGLE_API_KEY", "OPENROUTER_API_KEY", "ZHIPUAI_API_KEY", "HUNYUAN_API_KEY", "MISTRAL_API_KEY",
    "GROQ_API_KEY", "TOGETHER_API_KEY", "DASHSCOPE_API_KEY", "MOONSHOT_API_KEY", "XAI_API_KEY",
    "AZURE_OPENAI_API_KEY", "FIREWORKS_API_KEY", "CEREBRAS_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
    "API_KEY",
})


def credential_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential (see ``CREDENTIAL_NAME``)."""
    upper = name.upper()
    return upper in PROVIDER_VARIABLES or upper == "MYSQL_PWD" or CREDENTIAL_NAME.search(upper) is not None


def credential_value(value: str) -> bool:
    """Whether a value carries a password whatever its name (see ``CREDENTIAL_VALUE``)."""
    return CREDENTIAL_VALUE.search(value) is not None


def split_environ(environ: Mapping[str, str] | None = None, *, secrets: Iterable[str | None] = (),
                  drop: Iterable[str | None] = (), allow: Iterable[str] = ()) -> tuple[dict[str, str], list[str]]:
    """A copy of ``environ`` (default ``os.environ``) fit for a child process — see the module —
    and the sorted names of the variables left out (``AGENT_SERVER_*`` settings not among them).

    ``secrets``: values no variable may contain (``None`` and short values are ignored);
    ``drop``: variable names to leave out; ``allow``: names kept although ``credential_name`` or
    ``credential_value`` says they hold a credential (never one in ``drop`` or holding a secret)."""
    source = os.environ if environ is None else environ
    keys = [s for s in secrets if s and len(s) >= MIN_SECRET_CHARS]
    names = {d for d in drop if d}
    allowed = set(allow)
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for k, v in source.items():
        if k.startswith("AGENT_SERVER_"):
            continue
        if k in names or any(s in v for s in keys) or (
                (credential_name(k) or credential_value(v)) and k not in allowed):
            dropped.append(k)
        else:
            kept[k] = v
    return kept, sorted(dropped)


def scrubbed_environ(environ: Mapping[str, str] | None = None, *, secrets: Iterable[str | None] = (),
                     drop: Iterable[str | None] = (), allow: Iterable[str] = ()) -> dict[str, str]:
    """``split_environ``'s environment alone."""
    return split_environ(environ, secrets=secrets, drop=drop, allow=allow)[0]


def dropped_notice(names: Iterable[str]) -> str:
    """The line the first shell call of a session adds when variables were left out."""
    listed = ", ".join(names)
    return (f"[agent-server: these environment variables were left out of the shell because they may hold "
            f"credentials: {listed}. To pass one, add its name to `shell_env_allow` in the `[policy]` table of "
            "the agent-server config.]")


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (at least ``MIN_SECRET_CHARS`` long) replaced by ``<redacted>``."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, "<redacted>")
    return text
