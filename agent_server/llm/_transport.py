"""The HTTP transport of a model endpoint: httpx's, without what a plain-http endpoint never uses.

Role: ``endpoint_transport(base_url)`` gives the transport ``ChatClient`` hands to
``httpx.AsyncClient``: ``None`` (httpx's default, with its verified TLS context and the proxies of
the environment) for ``https://`` endpoints and whenever the environment names a proxy; for a
plain ``http://`` endpoint with no proxy, httpx's own ``AsyncHTTPTransport`` built without a TLS
context — httpx's constructor loads the CA bundle (~15 ms, ~1 MiB) even when no connection will
ever use TLS. Should a TLS connection be opened through it after all, httpcore builds its own
verified default context then.

Importing this module also keeps httpx from importing its command-line client (``httpx._main``
pulls in click, pygments and rich when they happen to be installed: tens of milliseconds and
megabytes for a CLI this server never runs); httpx falls back to its own stub ``main``. And when
``sniffio`` is not installed (anyio ≥ 4.12 no longer needs it), it is marked missing in
``sys.modules``: httpcore runs ``import sniffio`` on every lock and event it sets up (about 7 per
request) and each failed import searched every ``sys.path`` entry again (≈ 60 µs, ≈ 0.4 ms per
request); a name marked ``None`` fails at once with the same ``ImportError``.

Must never: weaken TLS — an ``https://`` endpoint always gets httpx's verified default.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from urllib.parse import urlsplit

sys.modules.setdefault("httpx._main", None)  # before the first ``import httpx`` of the process
if "sniffio" not in sys.modules and find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # not installed: httpcore's per-call ``import sniffio`` fails at once

import httpx  # noqa: E402


class PlainHTTPTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` for ``http://`` URLs, made without a TLS context (httpcore's
    pool creates a verified one itself if a TLS connection is ever needed)."""

    def __init__(self, limits: httpx.Limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)) -> None:
        # not super().__init__(): that is what loads the CA bundle
        import httpcore

        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=None, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, http1=True, http2=False)


def endpoint_transport(base_url: str) -> httpx.AsyncBaseTransport | None:
    """The transport for requests to ``base_url``: a ``PlainHTTPTransport`` for an ``http://`` URL
    when the environment names no proxy, else ``None`` (httpx's default transport and proxies)."""
    if urlsplit(base_url).scheme.lower() != "http":
        return None
    from urllib.request import getproxies

    if any(scheme != "no" for scheme in getproxies()):  # a proxy (NO_PROXY alone names none):
        return None  # keep httpx's own proxy handling, which a custom transport would turn off
    return PlainHTTPTransport()
