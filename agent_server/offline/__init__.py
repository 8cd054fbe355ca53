"""The bundled offline OpenAI-compatible endpoint.

Role: a real HTTP/1.1 server on 127.0.0.1 that answers ``POST /v1/chat/completions`` from a script
of recorded or built responses and records every request byte for byte. The test suite drives
agent-server through it, and the user-facing demo runs it (``python -m agent_server.offline``)
so agent-server can be tried without any model.

Must never: be mistaken for a model — it replays what it was given, and the demo says so — and
never import anything else of ``agent_server`` (it is a peer, talked to over HTTP only).
"""

from ._http import RecordedRequest
from ._script import (
    DEMO_SCRIPT,
    KINDS,
    Script,
    load_script,
    normalize_response,
    text_stream,
    tool_call_stream,
)
from ._server import OfflineEndpoint, ThreadedEndpoint

__all__ = [
    "DEMO_SCRIPT", "KINDS", "OfflineEndpoint", "RecordedRequest", "Script", "ThreadedEndpoint",
    "load_script", "normalize_response", "text_stream", "tool_call_stream",
]
