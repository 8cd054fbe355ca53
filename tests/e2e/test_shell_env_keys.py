"""End to end (issue 32 §9): ``env`` in the shell showed ``DEEPSEEK_API_KEY`` to the model and the
log — a provider key of the user's environment that was not the configured one, so neither the
configured variable's name nor the key's value caught it. The real server, its sandboxed shell
(the default mode) and the official ACP SDK."""

import sys
from pathlib import Path

from support.acp_client import ClientConfig
from support.sessions import call, config_env

from agent_server.offline import text_stream, tool_call_stream

FIELD_KEY = "sk-deepseek-field-case-0123456789"


def tool_results(endpoint):
    return [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "tool"]


async def run_env_twice(factory, endpoint, workspace, env, config=None):
    endpoint.push(tool_call_stream([call("e1", "bash", command="env")]))
    endpoint.push(tool_call_stream([call("e2", "bash", command="env")]))
    endpoint.push(text_stream("done"))
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **env, **(config or {})},
                      config=ClientConfig(permission="allow_once"))
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "show the environment")).stop_reason == "end_turn"
    return h, sid, tool_results(endpoint)


async def test_env_showed_deepseek_api_key_to_the_model_and_the_log(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    env = {"DEEPSEEK_API_KEY": FIELD_KEY, "MY_SERVICE_SECRET": "s3cr3t-value-123", "GITHUB_TOKEN": "ghp_kept_for_gh",
           "NPM_TOKEN": "npm_kept_for_npm", "HARMLESS": "visible"}
    h, sid, (first, second) = await run_env_twice(acp_harness_factory, endpoint, workspace, env)
    for shown in (first, second):
        assert FIELD_KEY not in shown and "DEEPSEEK_API_KEY" not in shown.split("\n[agent-server")[0]
        assert "s3cr3t-value-123" not in shown
        assert "ghp_kept_for_gh" not in shown and "npm_kept_for_npm" not in shown  # tokens too (finding 19)
        assert "HARMLESS=visible" in shown
    # the first call names what it left out and how to keep it; the second does not repeat it
    assert "DEEPSEEK_API_KEY, GITHUB_TOKEN, MY_SERVICE_SECRET, NPM_TOKEN" in first and "`shell_env_allow`" in first and "[policy]" in first
    assert "shell_env_allow" not in second
    log = (agent_state_dir / "sessions" / sid / "events.jsonl").read_text()
    assert FIELD_KEY not in log and "s3cr3t-value-123" not in log
    # the user sees the same notice in the tool's output
    shown_to_user = str(h.updates(sid, "tool_call_update"))
    assert "shell_env_allow" in shown_to_user and FIELD_KEY not in shown_to_user


async def test_the_shells_environment_kept_aws_secret_access_key_pgpassword_and_a_database_url_with_its_password(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Newcomer finding 19: only ``STRIPE_SECRET_KEY`` was left out of ``env``; the AWS keys, the
    Postgres password and a database URL carrying its password reached the model."""
    secrets = {"AWS_SECRET_ACCESS_KEY": "awsfake-secret-0001", "AWS_SESSION_TOKEN": "awstok-0002",
               "AWS_ACCESS_KEY_ID": "AKIAFAKE0003", "PGPASSWORD": "pgfake-0004", "MYSQL_PWD": "mysqlfake-0005",
               "DATABASE_URL": "postgres://u:dbpass-0006@db.example/app", "MY_DB_PASSWORD": "mydbpass-0007",
               "AZURE_CLIENT_SECRET": "azfake-0008", "REDIS_URL": "redis://:redispass-0009@cache.example:6379",
               "STRIPE_SECRET_KEY": "sk_fake-0010"}
    kept = {"AWS_REGION": "eu-west-1", "LANG": "C.UTF-8",
            "CACHE_URL": "redis://cache.example:6379/0"}
    h, sid, (first, second) = await run_env_twice(acp_harness_factory, endpoint, workspace, {**secrets, **kept})
    log = (agent_state_dir / "sessions" / sid / "events.jsonl").read_text()
    for value in secrets.values():
        for seen in (first, second, log):
            assert value not in seen
    for name, value in kept.items():  # what builds need stays
        assert f"{name}={value}" in first
    notice = first.split("\n[agent-server")[1]
    assert all(name in notice for name in secrets) and "shell_env_allow" in notice


async def test_a_variable_named_in_shell_env_allow_reaches_the_shell(
        acp_harness_factory, endpoint, workspace, tmp_path):
    config = config_env(tmp_path, '[policy]\nshell_env_allow = ["DEEPSEEK_API_KEY"]\n')
    _, _, (first, _) = await run_env_twice(acp_harness_factory, endpoint, workspace,
                                           {"DEEPSEEK_API_KEY": FIELD_KEY, "OPENAI_API_KEY": "sk-other-0123456789"},
                                           config)
    assert f"DEEPSEEK_API_KEY={FIELD_KEY}" in first and "sk-other-0123456789" not in first
    assert "OPENAI_API_KEY" in first.split("\n[agent-server")[1]  # still named as left out


async def test_a_key_the_client_passes_in_an_mcp_servers_env_reaches_it_others_do_not(
        acp_harness_factory, endpoint, workspace):
    server = {"name": "envy", "command": sys.executable, "args": [str(Path(__file__).with_name("env_mcp_server.py"))],
              "env": [{"name": "OPENAI_API_KEY", "value": "sk-passed-by-the-client-0123"}]}
    endpoint.push(tool_call_stream([call("m1", "mcp__envy__environ", variable="OPENAI_API_KEY"),
                                    call("m2", "mcp__envy__environ", variable="DEEPSEEK_API_KEY")]))
    endpoint.push(text_stream("done"))
    config = workspace.parent / "mcp-config.toml"
    config.write_text("[agent]\nmcp_start_wait = 120\n")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(config),
                                       "DEEPSEEK_API_KEY": FIELD_KEY},
                                  config=ClientConfig(permission="allow_once"))
    await h.initialize()
    sid = (await h.new_session(str(workspace), mcp_servers=[server])).session_id
    assert (await h.prompt(sid, "ask the server")).stop_reason == "end_turn"
    passed, other = tool_results(endpoint)
    assert passed.startswith("sk-passed-by-the-client-0123\n") and other.startswith("<unset>\n")
