"""The end-to-end replay check, shared by the folders of end-to-end tests (``tests/e2e``,
``tests/checkpoints``): every offline endpoint made in such a test behaves like a provider that
refuses a dangling tool call or an empty assistant message (HTTP 400), and at the end of every
test each model request it received must be rebuilt byte for byte by ``agent-server replay``
from the session logs (``support.replay.assert_replay_matches``).

A folder's ``conftest.py`` takes it with ``from support.replay_check import *``. Opt out with
``@pytest.mark.replay_exempt("why")`` (e.g. a test that deletes its session).
"""

from __future__ import annotations

import pytest

from agent_server.offline import OfflineEndpoint
from support.replay import assert_replay_matches, chat_bodies


def pytest_configure(config):
    config.addinivalue_line("markers", "replay_exempt(reason): skip the end-of-test replay check")


@pytest.fixture(autouse=True)
def replay_every_request(request, monkeypatch, agent_state_dir):
    """Track the test's endpoints (strict about history); afterwards check replay against them."""
    endpoints: list[OfflineEndpoint] = []
    original = OfflineEndpoint.__init__

    def init(self, *args, reject_invalid_history=True, **kwargs):
        original(self, *args, reject_invalid_history=reject_invalid_history, **kwargs)
        endpoints.append(self)

    monkeypatch.setattr(OfflineEndpoint, "__init__", init)
    yield endpoints
    if request.node.get_closest_marker("replay_exempt"):
        return
    if not any(chat_bodies(ep.requests) for ep in endpoints):
        return
    outcome = getattr(request.node, "rep_call", None)
    if outcome is not None and outcome.failed:
        return  # the test's own failure says more
    requests = [r for ep in endpoints for r in ep.requests]
    assert_replay_matches(agent_state_dir, requests)


@pytest.fixture
async def endpoint():
    """The offline endpoint of a test (started, stopped after it); tracked by the replay check."""
    async with OfflineEndpoint() as ep:
        yield ep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item (``rep_call``) so the replay check can skip a failed test."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
