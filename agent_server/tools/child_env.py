"""The environment every process the tools start gets (issue 11 §1 c): the server's own minus
its settings and its credentials.

Role: ``scrubbed_environ`` is the one place that decides what a child (``rg``, the shell, later MCP
servers) inherits: no ``AGENT_SERVER_*`` variable, no variable named in ``drop`` (the configured
``api_key_env``), no variable whose *value* contains one of ``secrets`` (the API key, also when it
is embedded, e.g. ``Bearer sk-…``), and no variable whose name says it holds an API key
(``*_API_KEY``, ``*_API_TOKEN`` …) — the server's own provider keys must not reach a child through
another name. ``redact`` removes ``secrets`` from text (defence in depth only: an encoding of the
key, e.g. base64, passes).

Must never: return the server's ``os.environ`` itself (a copy is returned).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

#: Shorter "secrets" are not treated as secrets (a dummy ``x`` would mangle every value).
MIN_SECRET_CHARS = 8


def scrubbed_environ(environ: Mapping[str, str] | None = None, *, secrets: Iterable[str | None] = (),
                     drop: Iterable[str | None] = ()) -> dict[str, str]:
    """A copy of ``environ`` (default ``os.environ``) fit for a child process — see the module.

    ``secrets``: values no variable may contain (``None`` and short values are ignored);
    ``drop``: variable names to leave out."""
    source = os.environ if environ is None else environ
    keys = [s for s in secrets if s and len(s) >= MIN_SECRET_CHARS]
    names = {d for d in drop if d}
    return {k: v for k, v in source.items()
            if not k.startswith("AGENT_SERVER_") and k not in names
            and not any(s in v for s in keys)}


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (at least ``MIN_SECRET_CHARS`` long) replaced by ``<redacted>``."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, "<redacted>")
    return text
