"""agent-server: a coding agent behind the editor (ACP over stdio, any OpenAI-compatible model).

This module must stay import-light: the CLI imports it before answering ``initialize``.
"""

__version__ = "0.1.0"
