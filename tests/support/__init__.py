"""Test support for agent-server: ACP schema validation and ACP client harnesses.

* ``acp_schema``  – validate a JSON-RPC transcript (both directions) against the official ACP v1 schema.
* ``transcript``  – the raw, timestamped record of every JSON-RPC line exchanged with an agent.
* ``acp_client``  – drive an agent subprocess with the official ACP Python SDK as the client.
* ``raw_agent``   – drive an agent subprocess with plain NDJSON (malformed-input tests).
* ``fixtures``    – pytest fixtures built on the above (import them from a conftest).
"""
