"""The JSON-RPC surface: the NDJSON engine, the ACP handlers, and the stdio wiring.

Must never: hold conversation state outside the session log.
"""
