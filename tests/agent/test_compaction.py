"""Compaction's pure parts: range selection (property: no tool call separated from its results,
the tail kept verbatim), the replacement in the projection, the summary request's rebuild, the
token estimate, the repeated-call reminder and the price configuration."""

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.agent.budget import estimate_tokens, session_cost, usage_update
from agent_server.agent.compaction import (
    CHECKPOINT_MARKER,
    Compactor,
    checkpoint_text,
    choose_cut,
    message_tokens,
    valid_cuts,
)
from agent_server.agent.replay import logged_requests
from agent_server.agent.request import compaction_body, pending_body, render_transcript, request_body
from agent_server.agent.step import RequestHeader, RetryPolicy
from agent_server.config.load import AgentSettings, ConfigError, load_config
from agent_server.llm import AssembledMessage, Finish, encode_body
from agent_server.session import EventLog, derive_messages, surface_messages
from agent_server.tools.repeats import repeat_count, repeat_reminder

HEADER = {"system": "S", "model": "m", "params": {}, "tools": [], "reasoning_content": "drop"}

# one turn = a prompt, then steps: each step is an assistant message with 0..3 calls (sizes of results)
turns = st.lists(
    st.tuples(st.integers(1, 400),  # prompt size
              st.lists(st.tuples(st.integers(0, 300), st.lists(st.integers(1, 900), max_size=3)), max_size=4)),
    min_size=1, max_size=5)


def build_log(tmp_path, shape, name="s"):
    log = EventLog.create(tmp_path / name / "events.jsonl", {"cwd": str(tmp_path)})
    log.append("request/header", HEADER)
    for t, (prompt, steps) in enumerate(shape, start=1):
        log.append("turn/start", {"turn": t})
        log.append("user", {"turn": t, "content": f"prompt {t} " + "p" * prompt})
        for s, (text, results) in enumerate(steps, start=1):
            log.append("step/start", {"turn": t, "step": s})
            calls = [{"id": f"c{t}.{s}.{i}", "name": "read", "arguments": json.dumps({"n": i})} for i in range(len(results))]
            log.append("assistant", {"turn": t, "step": s, "text": "a" * text, "tool_calls": calls, "usage": None})
            for call, size in zip(calls, results):
                log.append("tool/result", {"turn": t, "call_id": call["id"], "content": "r" * size})
        log.append("turn/end", {"turn": t, "exit": "end_turn"})
    return log


class SummaryClient:
    """A model client whose every answer is ``summary``; the bodies it was sent are kept in ``sent``."""

    def __init__(self, summary="Files were read."):
        self.summary = summary
        self.sent: list[bytes] = []

    async def stream(self, body):
        self.sent.append(body)
        yield Finish(AssembledMessage(content=self.summary, reasoning=""))


async def _quiet(update):
    pass


def compact(log, window, *, turn, step=1, reason="threshold", requests=None, client=None, tools=None, emit=_quiet):
    """Compact ``log`` once as a step would (``Compactor.compact``, not announced), with the
    header ``HEADER`` (its tools: ``tools``) and ``client`` (a ``SummaryClient`` by default);
    returns the compactor and the client."""
    client = client if client is not None else SummaryClient()
    compactor = Compactor(log, emit, AgentSettings(), window, RetryPolicy(), requests)
    header = RequestHeader(system=HEADER["system"], model=HEADER["model"], params={},
                           tools=tools if tools is not None else HEADER["tools"], reasoning_content="drop")
    asyncio.run(compactor.compact(client, header, turn=turn, step=step, reason=reason, announce=False))
    return compactor, client


def assert_calls_with_results(messages):
    pending = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending
            pending.discard(message["tool_call_id"])
        else:
            assert not pending
            pending = {c["id"] for c in message.get("tool_calls") or []}


@settings(max_examples=150, deadline=None)
@given(shape=turns, ratio=st.floats(0.05, 0.5))
def test_range_selection_never_separates_a_call_from_its_results_and_keeps_the_tail_verbatim(tmp_path_factory, shape, ratio):
    log = build_log(tmp_path_factory.mktemp("p"), shape)
    pairs = surface_messages(log.events)
    messages = [m for _, m in pairs]
    tokens = [message_tokens(m, 4.0) for m in messages]
    cut = choose_cut(messages, tokens, ratio)
    if cut is None:
        assert valid_cuts(messages) == []
        return
    head_calls = {c["id"] for m in messages[:cut] for c in m.get("tool_calls") or []}
    head_results = {m["tool_call_id"] for m in messages[:cut] if m["role"] == "tool"}
    tail_results = {m["tool_call_id"] for m in messages[cut:] if m["role"] == "tool"}
    assert head_calls == head_results and not (head_calls & tail_results)
    assert messages[cut]["role"] in ("user", "assistant")
    fitting = [k for k in valid_cuts(messages) if sum(tokens[k:]) >= ratio * sum(tokens)]
    if fitting:  # the latest cut that keeps at least the ratio
        assert cut == fitting[-1] and sum(tokens[cut:]) >= ratio * sum(tokens)
    # applying the replacement: one checkpoint, then the tail byte-identical; the events stay
    before = len(log.events)
    log.append("compaction/end", {"first_seq": pairs[0][0], "last_seq": pairs[cut][0] - 1, "message": "CP"})
    after = derive_messages(log.events)
    assert after[0] == {"role": "user", "content": "CP"} and after[1:] == messages[cut:]
    assert_calls_with_results(after[1:])
    assert len(log.events) == before + 1


def test_a_second_compaction_replaces_the_first_checkpoint_too(tmp_path):
    log = build_log(tmp_path, [(10, [(5, [20])]), (10, [(5, [])]), (10, [])])
    pairs = surface_messages(log.events)
    log.append("compaction/end", {"first_seq": pairs[0][0], "last_seq": pairs[3][0] - 1, "message": "CP1"})
    pairs2 = surface_messages(log.events)
    assert pairs2[0] == (pairs[0][0], {"role": "user", "content": "CP1"})
    log.append("compaction/end", {"first_seq": pairs2[0][0], "last_seq": pairs2[2][0] - 1, "message": "CP2"})
    assert derive_messages(log.events) == [{"role": "user", "content": "CP2"}] + [m for _, m in pairs2[2:]]
    log.append("compaction/end", {"first_seq": 1, "last_seq": log.last_seq, "aborted": "failed"})  # no message
    assert derive_messages(log.events)[0]["content"] == "CP2"


def test_no_valid_cut_when_the_history_is_one_prompt_or_one_open_call():
    assert valid_cuts([{"role": "user", "content": "x"}]) == []
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {}}]}
    assert valid_cuts([{"role": "user", "content": "x"}, call, {"role": "tool", "tool_call_id": "c", "content": ""}]) == [1]


def test_checkpoint_keeps_the_task_verbatim_and_starts_with_the_marker():
    text = checkpoint_text("Fix bug #12 — don't touch CI.", "now the docs", "summary here")
    assert text.startswith(CHECKPOINT_MARKER)
    assert "Fix bug #12 — don't touch CI." in text and "now the docs" in text and "summary here" in text


def test_summary_request_is_rebuilt_from_the_log_and_listed_by_replay_in_order(tmp_path):
    log = build_log(tmp_path, [(10, [(5, [30])]), (12, [])])
    pairs = surface_messages(log.events)
    start = log.append("compaction/start", {
        "turn": 2, "step": 1, "reason": "threshold", "estimate": 99, "window": 100, "first_seq": pairs[0][0],
        "last_seq": pairs[3][0] - 1, "system": "SUM", "instruction": "Do it:", "model": "m",
        "params": {"temperature": 0}, "max_transcript_chars": 10_000})
    log.append("compaction/attempt", {"attempt": 1, "error": {"code": "SERVER"}, "status": 500})
    log.append("compaction/summary", {"text": "sum", "usage": None, "model": "m"})
    log.append("compaction/end", {"first_seq": pairs[0][0], "last_seq": pairs[3][0] - 1, "message": "CP"})
    log.append("turn/start", {"turn": 3})
    log.append("user", {"turn": 3, "content": "next"})
    log.append("step/start", {"turn": 3, "step": 1})
    log.append("assistant", {"turn": 3, "step": 1, "text": "ok", "tool_calls": []})
    body = compaction_body(log.events, start.seq)
    assert body["model"] == "m" and body["temperature"] == 0 and body["messages"][0] == {"role": "system", "content": "SUM"}
    assert "prompt 1" in body["messages"][1]["content"] and "prompt 2" not in body["messages"][1]["content"]
    requests = logged_requests(log.events)
    assert [(r.kind, r.outcome) for r in requests] == [("step", "ok"), ("compaction", "error:SERVER"),
                                                         ("compaction", "ok"), ("step", "ok")]
    assert requests[1].body == requests[2].body == encode_body(body)
    assert json.loads(requests[3].body)["messages"][1] == {"role": "user", "content": "CP"}


def test_a_compaction_cut_short_by_a_crash_is_listed_as_uncertain(tmp_path):
    log = build_log(tmp_path, [(10, [(5, [])])])
    log.append("compaction/start", {"turn": 1, "step": 2, "first_seq": 4, "last_seq": 5, "system": "S",
                                    "instruction": "I", "model": "m", "params": {}, "max_transcript_chars": 100})
    last = logged_requests(log.events)[-1]
    assert (last.kind, last.outcome, last.certain) == ("compaction", "unknown", False)


def test_transcript_is_bounded_and_deterministic():
    messages = [{"role": "user", "content": "short"}, {"role": "tool", "tool_call_id": "c", "content": "x" * 50_000},
                {"role": "assistant", "content": "y" * 20_000}]
    text = render_transcript(messages, 6_000)
    assert len(text) <= 6_000 and "short" in text and "characters left out" in text
    assert text == render_transcript(messages, 6_000)
    assert render_transcript(messages[:1], 6_000) == "[user]\nshort"


def test_estimate_is_characters_over_chars_per_token_then_provider_usage_plus_what_was_added(tmp_path):
    log = build_log(tmp_path, [(40, [])])
    chars = len(encode_body(pending_body(log.events)).decode())
    assert estimate_tokens(log.events, 4.0) == round(chars / 4)
    assert estimate_tokens(log.events, 2.0) == round(chars / 2)
    step = log.append("step/start", {"turn": 2, "step": 1})
    log.append("assistant", {"turn": 2, "step": 1, "text": "z" * 400, "tool_calls": [],
                             "usage": {"prompt_tokens": 1000, "completion_tokens": 100}})
    added = len(encode_body(pending_body(log.events)).decode()) - len(encode_body(request_body(log.events, step.seq)).decode())
    assert estimate_tokens(log.events, 4.0) == 1000 + round(added / 4)
    log.append("compaction/end", {"first_seq": 3, "last_seq": 4, "message": "CP"})  # usage no longer describes it
    assert estimate_tokens(log.events, 4.0) == round(len(encode_body(pending_body(log.events)).decode()) / 4)


def test_third_fifth_and_eighth_identical_call_get_the_reminder(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {})
    log.append("turn/start", {"turn": 1})
    seqs = [log.append("tool/call", {"turn": 1, "call_id": f"c{i}", "name": "read", "arguments": '{"path":"a"}'}).seq
            for i in range(9)]
    log.append("tool/call", {"turn": 1, "call_id": "o", "name": "read", "arguments": '{"path": "a"}'})  # other string
    reminded = [bool(repeat_reminder(log.events, 1, "read", '{"path":"a"}', s)) for s in seqs]
    assert reminded == [False, False, True, False, True, False, False, True, False]
    log.append("turn/start", {"turn": 2})
    again = log.append("tool/call", {"turn": 2, "call_id": "n", "name": "read", "arguments": '{"path":"a"}'})
    assert repeat_count(log.events, 2, "read", '{"path":"a"}', again.seq) == 1  # counted per turn


def test_cost_is_priced_per_model_and_used_never_exceeds_size(tmp_path):
    agent = AgentSettings(price_per_million={"input": 1.0, "output": 2.0},
                          model_prices={"big": {"input": 10.0, "output": 20.0, "currency": "USD"}})
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {})
    log.append("request/header", {**HEADER, "model": "small"})
    log.append("assistant", {"usage": {"prompt_tokens": 1_000_000, "completion_tokens": 0}})
    log.append("request/header", {**HEADER, "model": "big"})
    log.append("assistant", {"usage": {"prompt_tokens": 0, "completion_tokens": 1_000_000}})
    log.append("compaction/summary", {"text": "s", "model": "small", "usage": {"prompt_tokens": 500_000}})
    assert session_cost(log.events, agent) == {"amount": 1.0 + 20.0 + 0.5, "currency": "USD"}
    assert session_cost(log.events, AgentSettings()) is None
    update = usage_update(log.events, {"prompt_tokens": 900, "completion_tokens": 300, "total_tokens": 1200}, None, 1000, agent)
    assert update["used"] == 1000 == update["size"] and update["cost"]["amount"] == 21.5
    assert usage_update(log.events, {"completion_tokens": 5}, 40, 1000, AgentSettings())["used"] == 45


def test_budget_keys_are_read_from_the_config_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[agent]\nchars_per_token = 3.5\ncompact_threshold = 0.7\nkeep_ratio = 0.2\n'
                    'price_per_million = { input = 0.27, output = 1.10 }\n'
                    '[agent.model_prices.big]\ninput = 3\noutput = 15\ncurrency = "EUR"\n')
    agent = load_config(path, env={}).agent
    assert (agent.chars_per_token, agent.compact_threshold, agent.keep_ratio) == (3.5, 0.7, 0.2)
    assert agent.price_for("other").input == 0.27 and agent.price_for("big").currency == "EUR"
    path.write_text("[agent]\ncompact_threshold = 1.5\n")
    with pytest.raises(ConfigError):
        load_config(path, env={})


def test_reminder_counts_the_same_arguments_whatever_their_key_order_or_spacing(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {})
    log.append("turn/start", {"turn": 1})
    variants = ['{"path":"a","limit":5}', '{"limit": 5, "path": "a"}', '{ "path" : "a" , "limit" : 5 }']
    seqs = [log.append("tool/call", {"turn": 1, "call_id": f"c{i}", "name": "read", "arguments": a}).seq
            for i, a in enumerate(variants)]
    assert repeat_count(log.events, 1, "read", variants[2], seqs[2]) == 3
    assert repeat_reminder(log.events, 1, "read", variants[2], seqs[2])
    assert repeat_count(log.events, 1, "read", '{"path":"b","limit":5}', seqs[2]) == 0


@pytest.mark.parametrize("reported", [0, 1, 50])
def test_provider_reporting_tiny_prompt_tokens_never_lowers_the_estimate_below_the_characters(tmp_path, reported):
    log = build_log(tmp_path, [(4000, [])])
    step = log.append("step/start", {"turn": 2, "step": 1})
    log.append("assistant", {"turn": 2, "step": 1, "text": "z" * 4000, "tool_calls": [],
                             "usage": {"prompt_tokens": reported, "completion_tokens": 100}})
    chars = len(encode_body(pending_body(log.events)).decode())
    assert chars / 4 > 2000 and step.seq
    assert estimate_tokens(log.events, 4.0) == round(chars / 4)


@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.one_of(st.floats(0, 1e6), st.floats(0, 1e-3), st.just(0.0)), min_size=2, max_size=60),
       ratio=st.floats(0.0, 1.0), roles=st.data())
def test_choose_cut_by_bisection_is_the_latest_fitting_cut_summed_as_before(tokens, ratio, roles):
    messages = [{"role": roles.draw(st.sampled_from(["user", "assistant"]))} for _ in tokens]
    cuts = valid_cuts(messages)
    fitting = [k for k in cuts if sum(tokens[k:]) >= ratio * sum(tokens)]
    assert choose_cut(messages, tokens, ratio) == (fitting[-1] if fitting else cuts[0] if cuts else None)


@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.one_of(st.floats(0, 1e6), st.floats(0, 1e-3), st.just(0.0)), min_size=2, max_size=60),
       ratio=st.floats(0.0, 1.0), roles=st.data(), hint=st.integers(-1, 61))
def test_choose_cut_with_a_hint_is_the_cut_without_it(tokens, ratio, roles, hint):
    """A load's plan gives the first compaction a cut to check first (two sums, not a bisection):
    right or wrong, the cut chosen is the one chosen without it."""
    messages = [{"role": roles.draw(st.sampled_from(["user", "assistant"]))} for _ in tokens]
    cuts = valid_cuts(messages)
    expected = choose_cut(messages, tokens, ratio)
    assert choose_cut(messages, tokens, ratio, cuts, hint) == expected
    assert choose_cut(messages, tokens, ratio, cuts, expected) == expected


@pytest.mark.parametrize("over", [1.3, 40.0])
def test_the_first_compaction_after_a_load_weighs_cuts_and_renders_nothing_again(tmp_path, monkeypatch, over):
    """Issue 33 item 6: the first prompt after ``session/load`` of a long log is a compaction whose
    transcript covers the whole replaced history; it took 478 ms against 24 ms to encode its body,
    weighing every message, finding the cuts and scanning the log for the user's requests again,
    then rendering the transcript. The load (``RequestMemo.prepare`` and
    ``Compactor.plan_summary``, in its worker thread, then ``RequestMemo.transcript`` in another) does that work once — the transcript the
    compaction will send included — and the compaction repeats none of it, while its body stays
    byte-equal to the pure ``compaction_body`` rebuilt from the log. ``over``: the history a little
    over the limit (the kept tail is ``keep_ratio`` of it) and far over it (the smallest tail)."""

    from agent_server.agent import compaction
    from agent_server.agent.compaction import Compactor
    from agent_server.agent.request_memo import RequestMemo

    log = build_log(tmp_path, [(50, [(20, [300, 40]), (30, [])])] * 60)
    requests = RequestMemo()
    requests.prepare(log.events)
    messages = requests.surface(log.events)
    window = int(sum(len(json.dumps(m)) for _, m in messages) / 4 / 0.8 / over)  # the history is past the limit
    loading = Compactor(log, _quiet, AgentSettings(), window, RetryPolicy(), requests)
    summary = loading.plan_summary()
    assert summary is not None
    prepared = requests.compaction_body(summary[1], summary[0])
    assert requests.transcripts_made == 1

    log.append("turn/start", {"turn": 61})  # the prompt after the load
    log.append("user", {"turn": 61, "content": "go on"})
    calls = []
    for name in ("message_tokens", "valid_cuts", "render_transcript", "surface_messages"):
        real = getattr(compaction, name, None)
        if real is not None:
            monkeypatch.setattr(compaction, name, lambda *a, _n=name, _f=real, **k: calls.append(_n) or _f(*a, **k))
    sent = compact(log, window, turn=61, requests=requests)[1].sent

    assert calls == [] and requests.transcripts_made == 1  # nothing weighed, cut or rendered again
    start = log.latest("compaction/start")
    assert start.data["last_seq"] > start.data["first_seq"]
    assert sent == [encode_body(compaction_body(log.events, start.seq))]  # what the model saw = the log's rebuild
    assert sent[0] is prepared  # the body the load encoded, not another encoding of it
    transcript = json.loads(sent[0])["messages"][1]["content"]
    assert ("[… " in transcript) == (over > 2)  # far over the limit, the transcript was cut to its budget


def test_the_first_compaction_after_a_load_listed_its_replaced_messages_and_weighed_them_and_the_tools_again(tmp_path, monkeypatch):
    """Issue 33 item 6: the compaction a load planned still listed the messages it replaces (a
    slice of the memo's 33k, 0.3 ms), compared them with the load's list (0.1 ms), encoded the
    request's tool schemas again to weigh its head (0.17 ms) and summed the 33k weights again to
    find its cut (0.3 ms) — most of its own 1.2 ms of CPU before its request. It now finds the
    load's body by the stretch of the memo's messages it covers (none dropped since), weighs equal
    schemas by their kept size and carries the load's sums on; the body is the same bytes."""

    from agent_server.agent import compaction, request_memo
    from agent_server.agent.compaction import Compactor
    from agent_server.agent.request_memo import RequestMemo

    class Listed(list):
        """The memo's list of messages, counting the slices taken of it."""

        slices = 0

        def __getitem__(self, index):
            if isinstance(index, slice):
                Listed.slices += 1
            return super().__getitem__(index)

    log = build_log(tmp_path, [(50, [(20, [300, 40]), (30, [])])] * 60)
    requests = RequestMemo()
    requests.prepare(log.events)
    requests._bare = Listed(requests._bare)  # noqa: SLF001 — the list the memo keeps its messages in
    messages = requests.surface(log.events)
    encoded: list[object] = []
    real_chars = compaction.body_chars
    monkeypatch.setattr(compaction, "body_chars", lambda body: encoded.extend(body) or real_chars(body))
    window = int(sum(len(json.dumps(m)) for _, m in messages) / 4 / 0.8 / 4)  # far past the limit
    tools = [{"type": "function", "function": {"name": f"t{n}", "description": "d" * 40, "parameters": {}}}
             for n in range(8)]
    requests._header = requests.header.model_copy(update={"data": {**requests.header.data, "tools": tools}})  # noqa: SLF001
    summary = Compactor(log, _quiet, AgentSettings(), window, RetryPolicy(), requests).plan_summary()
    assert summary is not None
    prepared = requests.compaction_body(summary[1], summary[0], *summary[2:])  # as the load's worker does
    assert encoded.count("t") == 1  # the load weighed the tools once
    log.append("turn/start", {"turn": 61})  # the prompt after the load
    log.append("user", {"turn": 61, "content": "go on"})
    Listed.slices = 0
    summed = requests.tail_sums_made
    # equal schemas, as the session makes them again
    sent = compact(log, window, turn=61, requests=requests, tools=json.loads(json.dumps(tools)))[1].sent

    assert Listed.slices == 0  # the replaced messages were not listed again
    assert encoded.count("t") == 1  # nor the equal tool schemas encoded again
    if request_memo._PLAIN_SUM:  # (CPython < 3.12: the load's sums of the weights carried on)
        assert requests.tail_sums_made == summed  # nor the 33k weights summed again
    assert requests.transcripts_made == 1
    start = log.latest("compaction/start")
    assert sent == [encode_body(compaction_body(log.events, start.seq))]  # what the model saw = the log's rebuild
    assert sent[0] is prepared


def _render_as_before(messages, max_chars):
    """``render_transcript`` as it was written before it counted blocks without making them (the
    text of every compaction logged since: a log's summary request must replay to the same bytes)."""
    from agent_server.agent.request import transcript_block

    blocks = [transcript_block(m) for m in messages]
    sizes = list(map(len, blocks))
    budget = max(0, max_chars - 2 * len(blocks))
    if sum(sizes) <= budget:
        return "\n\n".join(blocks)
    cap, rest, left = 0, sorted(sizes), budget
    for i, size in enumerate(rest):
        share = left // (len(rest) - i)
        if size > share:
            cap = share
            break
        left -= size
    else:
        cap = max(rest)
    out = []
    for block, size in zip(blocks, sizes):
        if size <= cap:
            out.append(block)
            continue
        marker = f"\n[… {size - cap} characters left out …]\n"
        keep = cap - len(marker)
        if keep < 0:
            keep = 0
        head = keep * 2 // 3
        out.append(block[:head] + marker + block[size - (keep - head):] if keep - head else block[:head] + marker)
    return "\n\n".join(out)


_texts = st.one_of(st.none(), st.just(""), st.text(max_size=300), st.text(alphabet="é😀\n ", max_size=40))
_calls = st.lists(st.fixed_dictionaries({"id": st.text(max_size=8), "type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": st.text(max_size=8), "arguments": st.text(max_size=200)})}), max_size=3)
_messages = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]), "content": _texts}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": _texts}, optional={"tool_calls": _calls}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": st.one_of(st.none(), st.text(max_size=8)),
                           "content": _texts}),
)


@settings(max_examples=300, deadline=None)
@given(messages=st.lists(_messages, max_size=30), max_chars=st.integers(0, 3_000))
def test_the_transcript_counted_without_its_blocks_is_the_transcript_as_before(messages, max_chars):
    """The transcript of a load's first compaction made every message's block (15 MB for a
    100k-event log) to count them, and most were then cut down to their marker: blocks are now
    counted without being made, and made only when some of their text is kept — the same text."""
    from agent_server.agent.request import transcript_block, transcript_block_chars

    assert [transcript_block_chars(m) for m in messages] == [len(transcript_block(m)) for m in messages]
    assert render_transcript(messages, max_chars) == _render_as_before(messages, max_chars)


def test_the_compaction_transcript_ran_to_three_times_its_limit_when_most_blocks_were_cut_to_their_marker(tmp_path):
    """Far over the limit (the first compaction after loading a long log: 33,000 messages), most
    blocks were cut to their marker and the markers were not counted: the transcript ran to ~3 ×
    ``max_transcript_chars`` (1.2 MB against ~400,000). A compaction logs ``transcript_rule: 2``
    now, which counts every character and leaves the middle of the history out whole when even the
    markers would not fit; its body is still the log's rebuild."""

    from agent_server.agent.request import TRANSCRIPT_RULE
    from agent_server.agent.request_memo import RequestMemo

    log = build_log(tmp_path, [(30, [(0, [200, 200, 200]), (40, [])])] * 60)
    log.append("turn/start", {"turn": 61})
    log.append("user", {"turn": 61, "content": "go on"})
    sent = compact(log, 2_000, turn=61, requests=RequestMemo())[1].sent
    start = log.latest("compaction/start")
    assert start.data["transcript_rule"] == TRANSCRIPT_RULE == 2
    content = json.loads(sent[0])["messages"][1]["content"]
    transcript = content.split("<transcript>\n", 1)[1].rsplit("\n</transcript>", 1)[0]
    replaced = [m for seq, m in surface_messages([e for e in log.events if e.seq < start.seq])
                if start.data["first_seq"] <= seq <= start.data["last_seq"]]
    assert len(render_transcript(replaced, start.data["max_transcript_chars"])) > 2 * start.data["max_transcript_chars"]
    assert len(transcript) <= start.data["max_transcript_chars"]  # rule 1 (above) ran far over it
    assert "messages left out" in transcript and "characters left out" in transcript
    assert sent == [encode_body(compaction_body(log.events, start.seq))]


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 3_000), min_size=0, max_size=120), max_chars=st.integers(300, 40_000))
def test_transcript_rule_2_is_never_longer_than_its_limit_and_keeps_a_history_that_fits_whole(sizes, max_chars):
    messages = [{"role": ("user", "assistant")[i % 2], "content": f"{i}:" + "x" * size} for i, size in enumerate(sizes)]
    text = render_transcript(messages, max_chars, 2)
    whole = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
    if len(whole) <= max_chars:
        assert text == whole  # whole, to the last character of the limit (rule 1 kept 2 per block spare)
    else:
        assert len(text) <= max_chars
        assert text == render_transcript(messages, max_chars, 2)  # deterministic
    if messages and len(whole) > max_chars:  # the last message is never the part left out whole
        assert text.endswith(messages[-1]["content"][-1:] or "]")


def test_a_log_whose_compaction_used_transcript_rule_1_replays_byte_exact_and_compacts_with_rule_2(tmp_path):
    """``tests/fixtures/logs/transcript-rule-1``: a compaction logged by the code before rule 2 (no
    ``transcript_rule``: its transcript ran to 2.5 × its limit) replays to the very bytes its endpoint
    received (their sha256, recorded then), and the same history compacted again now uses rule 2."""
    import hashlib
    import shutil

    from agent_server.agent.replay import logged_requests
    from agent_server.agent.request_memo import RequestMemo
    from agent_server.session import read_events
    from support.paths import FIXTURES

    fixture = FIXTURES / "logs" / "transcript-rule-1"
    recorded = json.loads((fixture / "requests.json").read_text())
    events = read_events(fixture / "events.jsonl")
    start = next(e for e in events if e.type == "compaction/start")
    assert start.seq == recorded["compaction_start_seq"] and "transcript_rule" not in start.data
    compactions = [r for r in logged_requests(events) if r.kind == "compaction"]
    assert [hashlib.sha256(r.body).hexdigest() for r in compactions] == recorded["sha256"]  # as the endpoint got it
    memo = RequestMemo()  # the live path: the memo's body for that compaction/start is the same bytes
    replaced = [m for seq, m in surface_messages([e for e in events if e.seq < start.seq])
                if start.data["first_seq"] <= seq <= start.data["last_seq"]]
    assert hashlib.sha256(memo.compaction_body(start.data, replaced)).hexdigest() == recorded["sha256"][0]

    copy = tmp_path / "s" / "events.jsonl"  # and it goes on: the same history, compacted now
    copy.parent.mkdir()
    shutil.copy(fixture / "events.jsonl", copy)
    log = EventLog.open(copy)
    try:
        log.append("turn/end", {"turn": 61, "exit": "end_turn"})
        for n in range(62, 120):
            log.append("turn/start", {"turn": n})
            log.append("user", {"turn": n, "content": f"prompt {n} " + "p" * 300})
            log.append("step/start", {"turn": n, "step": 1})
            log.append("assistant", {"turn": n, "step": 1, "text": "a" * 300, "tool_calls": [], "usage": None})
            log.append("turn/end", {"turn": n, "exit": "end_turn"})
        sent = compact(log, 2_000, turn=119, step=0, reason="command", requests=RequestMemo())[1].sent
        again = log.latest("compaction/start")
        assert again.seq > start.seq and again.data["transcript_rule"] == 2
        content = json.loads(sent[0])["messages"][1]["content"]
        assert len(content.split("<transcript>\n", 1)[1]) <= again.data["max_transcript_chars"] + len("\n</transcript>")
        rebuilt = [r.body for r in logged_requests(log.events) if r.kind == "compaction"]
        assert rebuilt == [compactions[0].body, *sent]  # each with its own rule
    finally:
        log.close()


def test_a_compaction_whose_request_would_not_fit_is_never_logged_as_done(tmp_path, monkeypatch):
    """Finding 3's guard: a checkpoint that would leave the next request over the limit (here a
    summary let through uncut) is not applied — ``compaction/end`` ``aborted: "no_fit"``, no message,
    the history as it was — and the error says the sizes; before, it was logged done (the history
    grew: "about 90,916 → 90,976 tokens") and every later prompt failed."""

    from agent_server.agent.compaction import Compactor
    from agent_server.agent.exits import TurnFailed

    log = build_log(tmp_path, [(50, [(2000, [])]), (50, [(2000, [])]), (20, [])])
    before = derive_messages(log.events)
    updates = []

    async def emit(update):
        updates.append(update)

    monkeypatch.setattr(Compactor, "_within_budget", lambda self, summary: summary)
    with pytest.raises(TurnFailed) as failed:
        compact(log, 1500, turn=3, client=SummaryClient("s" * 40_000), emit=emit)
    assert failed.value.error["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert "would not make the next request fit" in failed.value.error["message"]
    end = log.latest("compaction/end")
    assert end.data["aborted"] == "no_fit" and "message" not in end.data
    assert derive_messages(log.events) == before
    assert updates[-1]["status"] == "failed"


def test_a_summary_longer_than_its_room_is_cut_to_it(tmp_path):

    from agent_server.agent.compaction import SUMMARY_CUT

    log = build_log(tmp_path, [(50, [(2000, [])]), (50, [(2000, [])]), (20, [])])
    compactor = compact(log, 1500, turn=3, client=SummaryClient("s" * 40_000))[0]
    message = log.latest("compaction/end").data["message"]
    assert message.endswith(SUMMARY_CUT) and message.count("s" * 100) > 0
    summary = message.split("Summary of the conversation so far:\n", 1)[1]
    assert len(summary) == int(150 * AgentSettings().chars_per_token)  # a tenth of the window
    assert log.latest("compaction/summary").data["text"] == "s" * 40_000  # the model's own words logged as sent
    assert compactor.last_change[1] < compactor.last_change[0]


def test_a_first_request_that_leaves_no_room_for_a_summary_is_named_as_the_reason(tmp_path):
    """When even replacing the whole history cannot fit (the first request, kept verbatim, nearly
    fills the window), the error names that — not "the most recent part … about 0 tokens"."""

    from agent_server.agent.exits import TurnFailed

    log = build_log(tmp_path, [(12_000, [(20_000, [])]), (20, [])])

    class Client:
        async def stream(self, body):
            raise AssertionError("no summary request that cannot help")
            yield

    with pytest.raises(TurnFailed) as failed:
        compact(log, 4000, turn=2, client=Client())
    # (12,009 + 29 characters) ÷ 4
    assert "the session's first request and the current one, about 3010 tokens" in failed.value.error["message"]
    assert log.latest("compaction/start") is None


def test_a_session_whose_compaction_got_no_summary_failed_every_later_prompt(tmp_path):
    """Newcomer 5's finding 2: the summarising request (sent with no tools) was answered with a
    tool call and no text, every try: "compacting the history failed: the summary was empty", and
    every later prompt compacted again and failed the same way — the session was dead. The end of
    the transcript the request sent now stands for the summary (logged as ``compaction/fallback``,
    so the next requests replay from the log), and the user is told so."""

    from agent_server.agent.compaction import FALLBACK_HEAD, Compactor
    from agent_server.llm import AssembledToolCall

    log = build_log(tmp_path, [(50, [(2000, [])]), (50, [(1500, [])]), (20, [])])
    before = derive_messages(log.events)

    class ToolCallingClient:
        def __init__(self):
            self.sent = []

        async def stream(self, body):
            self.sent.append(body)
            yield Finish(AssembledMessage(content="", reasoning="", finish_reason="tool_calls", tool_calls=[
                AssembledToolCall(id="c1", name="read", arguments='{"path": "x"}')]))

    updates = []

    async def emit(update):
        updates.append(update)

    client = ToolCallingClient()
    compactor = Compactor(log, emit, AgentSettings(), 1500, RetryPolicy(max_attempts=2, base_delay=0.0), None)
    header = RequestHeader(system="S", model="m", params={}, tools=[], reasoning_content="drop")
    asyncio.run(compactor.compact(client, header, turn=3, step=1, reason="threshold"))

    assert len(client.sent) == 2  # both tries were made, then no more requests
    fallback = log.latest("compaction/fallback").data["text"]
    assert fallback.startswith(FALLBACK_HEAD) and fallback.endswith("\n[user]\nprompt 2 " + "p" * 50)  # the end replaced
    assert log.latest("compaction/summary") is None
    end = log.latest("compaction/end")
    assert "aborted" not in end.data and fallback in end.data["message"]
    after = derive_messages(log.events)
    assert len(after) < len(before) and any(fallback in str(m["content"]) for m in after)
    assert compactor.last_change[1] < compactor.last_change[0]
    said = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert len(said) == 1 and "the model gave no summary of the earlier part" in said[0]
    requests = logged_requests(log.events)  # the two tries are the only compaction requests the log lists
    assert [(r.kind, r.outcome) for r in requests if r.kind == "compaction"] == [
        ("compaction", "error:EMPTY_RESPONSE"), ("compaction", "error:EMPTY_RESPONSE")]


def test_a_failed_compaction_told_the_user_nothing_of_what_to_do(tmp_path):
    """The same finding's message: a summary request the endpoint refused left only "compacting the
    history failed: …" — the prompt had not reached the model and the user was not told."""

    from agent_server.agent.exits import TurnFailed
    from agent_server.llm import LLMError

    log = build_log(tmp_path, [(50, [(2000, [])]), (50, [(1500, [])]), (20, [])])

    class Refusing:
        async def stream(self, body):
            raise LLMError("BAD_REQUEST", "the endpoint said no")
            yield

    with pytest.raises(TurnFailed) as failed:
        compact(log, 1500, turn=3, client=Refusing())
    assert failed.value.error["message"] == ("compacting the history failed: the endpoint said no. Your prompt did "
                                             "not reach the model: send it again to retry, or start a new session")
    with pytest.raises(TurnFailed) as failed:
        compact(log, 1500, turn=3, client=Refusing(), reason="command")
    assert failed.value.error["message"] == "compacting the history failed: the endpoint said no"
