"""pytest fixtures for ACP tests: agent command and environment, SDK and raw harnesses, schema.

Role: glue between pytest and the harnesses. Import them from a conftest, e.g. in
``tests/conftest.py``::

    from support.fixtures import *  # noqa: F401,F403

Overridable fixtures: ``agent_command`` (argv of the agent; default: the ``agent-server`` console
script of this interpreter's environment, else ``python -m agent_server``) and ``agent_env``
(default: a per-test ``AGENT_SERVER_STATE_DIR`` and a model endpoint that refuses connections).

Harnesses made by ``acp_harness_factory`` / ``raw_agent_factory`` are closed at teardown, their
transcripts validated against the ACP schema (unless ``validate=False``), and the test errors if
any process of an agent's group is still alive.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from .acp_client import AcpHarness, ClientConfig
from .acp_schema import AcpSchema, load_schema, validate_transcript
from .raw_agent import RawAgentProcess
from .transcript import AGENT_TO_CLIENT

__all__ = [
    "acp_harness",
    "acp_harness_factory",
    "acp_schema",
    "agent_command",
    "agent_env",
    "agent_server_command",
    "agent_state_dir",
    "raw_agent",
    "raw_agent_factory",
    "workspace",
]

#: What raw-agent teardown validates by default: only the agent's side (raw tests send bad input on purpose).
RAW_VALIDATE: dict[str, Any] = {"check": frozenset({AGENT_TO_CLIENT})}
#: A base URL nothing listens on: a test that reaches the model without a fake endpoint fails fast.
UNREACHABLE_BASE_URL = "http://127.0.0.1:9/v1"


def agent_server_command() -> list[str]:
    """argv that starts the real server: the venv's ``agent-server`` script, else ``python -m agent_server``."""
    script = Path(sys.executable).with_name("agent-server")
    if script.exists():
        return [str(script)]
    found = shutil.which("agent-server")
    if found:
        return [found]
    return [sys.executable, "-m", "agent_server"]


def _validate_kwargs(validate: bool | dict[str, Any]) -> dict[str, Any] | None:
    if validate is False:
        return None
    return {} if validate is True else dict(validate)


@pytest.fixture
def agent_command() -> list[str]:
    """The agent under test (override to test another agent)."""
    return agent_server_command()


@pytest.fixture
def agent_state_dir(tmp_path: Path) -> Path:
    """A fresh ``AGENT_SERVER_STATE_DIR`` for this test."""
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory (absolute) to use as a session ``cwd``."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def agent_env(agent_state_dir: Path) -> dict[str, str]:
    """Environment for the agent: isolated state dir, dummy credentials, unreachable model endpoint."""
    return {
        "AGENT_SERVER_STATE_DIR": str(agent_state_dir),
        "AGENT_SERVER_BASE_URL": UNREACHABLE_BASE_URL,
        "AGENT_SERVER_API_KEY": "test-key",
        "AGENT_SERVER_MODEL": "test-model",
    }


@pytest.fixture(scope="session")
def acp_schema() -> AcpSchema:
    """The loaded official ACP schema with its method bindings."""
    return load_schema()


HarnessFactory = Callable[..., Awaitable[AcpHarness]]


@pytest_asyncio.fixture
async def acp_harness_factory(agent_command: list[str], agent_env: dict[str, str]) -> AsyncIterator[HarnessFactory]:
    """Factory of started ``AcpHarness``es.

    ``await factory(command=None, *, env=None, config=None, cwd=None, validate=True, **kw)``:

    ``env`` is merged over ``agent_env``; ``validate`` is ``True`` (both directions), ``False``, or
    a dict of ``validate_transcript`` kwargs, applied at teardown.
    """
    created: list[tuple[AcpHarness, dict[str, Any] | None]] = []

    async def factory(
        command: Sequence[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        config: ClientConfig | None = None,
        cwd: str | Path | None = None,
        validate: bool | dict[str, Any] = True,
        **kwargs: Any,
    ) -> AcpHarness:
        harness = AcpHarness(
            command or agent_command, env={**agent_env, **(env or {})}, config=config, cwd=cwd, **kwargs
        )
        created.append((harness, _validate_kwargs(validate)))
        await harness.start()
        return harness

    yield factory

    problems = []
    for harness, validate_kwargs in created:
        if harness.process is None:
            continue  # never started (spawn failed): the test saw that error
        await harness.close()
        survivors = harness.group_members()
        if survivors:
            problems.append(f"agent {harness.command}: processes left in its group: {survivors}")
        if validate_kwargs is not None:
            report = harness.validate(collect=True, **validate_kwargs)
            if report.failures:
                problems.append("\n".join(str(f) for f in report.failures[:20]))
    if problems:
        pytest.fail("acp_harness teardown:\n" + "\n".join(problems), pytrace=False)


@pytest_asyncio.fixture
async def acp_harness(acp_harness_factory: HarnessFactory) -> AcpHarness:
    """A started ``AcpHarness`` on ``agent_command`` with the default ``ClientConfig``."""
    return await acp_harness_factory()


@pytest.fixture
def raw_agent_factory(agent_command: list[str], agent_env: dict[str, str]) -> Iterator[Callable[..., RawAgentProcess]]:
    """Factory of ``RawAgentProcess``es: ``factory(command=None, *, env=None, cwd=None, validate=..., **kw)``.

    By default only the agent's messages are schema-checked at teardown (raw tests send invalid
    input on purpose): ``validate={"check": {"agent->client"}}``.
    """
    created: list[tuple[RawAgentProcess, dict[str, Any] | None]] = []

    def factory(
        command: Sequence[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        validate: bool | dict[str, Any] = RAW_VALIDATE,
        **kwargs: Any,
    ) -> RawAgentProcess:
        agent = RawAgentProcess(command or agent_command, env={**agent_env, **(env or {})}, cwd=cwd, **kwargs)
        created.append((agent, _validate_kwargs(validate)))
        return agent

    yield factory

    problems = []
    for agent, validate_kwargs in created:
        agent.close()
        survivors = agent.group_members()
        if survivors:
            problems.append(f"agent {agent.command}: processes left in its group: {survivors}")
        if validate_kwargs is not None:
            report = validate_transcript(agent.transcript.snapshot(), collect=True, **validate_kwargs)
            if report.failures:
                problems.append("\n".join(str(f) for f in report.failures[:20]))
    if problems:
        pytest.fail("raw_agent teardown:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def raw_agent(raw_agent_factory: Callable[..., RawAgentProcess]) -> RawAgentProcess:
    """A ``RawAgentProcess`` on ``agent_command``."""
    return raw_agent_factory()
