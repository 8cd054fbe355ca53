"""The session host: sessions, their logs, lifecycle and policies, under every front end.

``cli → {server/acp, server/lsp} → host → agent → {llm, tools, prompt}`` (DESIGN.md §2). A front
end translates its protocol into ``SessionHost`` calls and the host's events (``session/update``
payloads through the front end's emitter) into its protocol; it owns nothing else.

Must never: import a front end (``agent_server.server``).
"""

from agent_server.host.errors import HostError
from agent_server.host.host import Emit, Frontend, SessionHost

__all__ = ["Emit", "Frontend", "HostError", "SessionHost"]
