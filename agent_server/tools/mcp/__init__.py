"""MCP servers a client passes in ``session/new``: their tools, offered to the model.

Role: ``specs_from_acp`` reads ACP ``mcpServers`` entries (stdio and http); ``expose_names`` maps
each server tool to a model-facing name ``mcp__<server>__<tool>`` (sanitised, collisions resolved);
``McpConnection`` runs one server with the official ``mcp`` SDK (imported only here, only when a
session has servers) and calls its tools with a timeout and cancel; ``render_result`` turns a
``CallToolResult`` into the text the model sees.

Must never: be imported on the ACP start-up path, or trust a server's annotations by itself (the
policy decides with the user's config).
"""

from agent_server.tools.mcp.names import expose_names
from agent_server.tools.mcp.results import render_result
from agent_server.tools.mcp.spec import McpServerSpec, McpSpecError, specs_from_acp

__all__ = ["McpServerSpec", "McpSpecError", "expose_names", "render_result", "specs_from_acp"]
