"""Moved to ``agent_server.host.commands`` (the session host); kept for old imports."""

from agent_server.host.commands import (  # noqa: F401
    COMMANDS,
    INIT_PROMPT,
    change_model,
    current_model,
    is_known,
    log_command,
    parse_command,
    unknown_command_text,
    usage_report,
)
