"""End-to-end set-up: the replay check of ``support.replay_check`` (every model request of a test
rebuilt byte for byte from the session logs). Opt out with ``@pytest.mark.replay_exempt("why")``."""

from support.replay_check import *  # noqa: F401,F403
