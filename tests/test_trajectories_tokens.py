"""Trajectories with the engine's tokens: an episode played through ``rehearsal gateway`` exports as ATIF with each
model call's prompt and completion token ids and logprobs, and the turn-boundary check says whether each call's
prompt continued the previous call's tokens exactly.

The provider is :mod:`tokenengine` (real HTTP on 127.0.0.1, a real byte-level BPE from ``tokenizers`` trained in
the test, vLLM's ``return_token_ids`` and ``logprobs`` fields) in front of the scripted
:class:`~rehearsal_env.agents.testing.ModelServer`, whose solver decides what to say; the gateway is a real
uvicorn server; the harness is :func:`rehearsal_env.harness.drive` with the official ``openai`` and ``mcp`` clients.
Needs the ``atif`` extra and ``tokenizers`` (the ``trl`` extra installs it), and the ``mcp`` extra for the episode
tests; each skips without it unless ``REHEARSAL_REQUIRE_ATIF=1`` / ``REHEARSAL_REQUIRE_MCP=1``.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest
from test_live_model import live_server  # noqa: F401  (the tiny model's server fixture: started, skipped, required)

from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.cli import main
from rehearsal_env.gateway import MAX_KEPT_BYTES, GatewayConfig, Ledger, gateway_app, keep_calls, read_kept
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.serve import Principal, Scope, ServerThread
from rehearsal_env.worlds import load_world

for _package, _why in (("atif", "the atif extra is not installed (pip install -e '.[atif]')"),
                       ("tokenizers", "the test engine's tokenizer needs tokenizers (pip install tokenizers; the trl "
                                      "extra installs it)")):
    if importlib.util.find_spec(_package) is None:
        if os.environ.get("REHEARSAL_REQUIRE_ATIF") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_ATIF=1 but {_why}", pytrace=False)
        pytest.skip(_why, allow_module_level=True)

from atif import Trajectory  # noqa: E402
from tokenengine import (  # noqa: E402
    EXACT_TEMPLATE,
    TEXT_TEMPLATE,
    TokenEngine,
    render,
    reply_text,
    special,
    train_tokenizer,
)

from rehearsal_env.trajectories import (  # noqa: E402
    DRIFT,
    EXACT,
    UNCHECKED,
    ModelCall,
    call_from_line,
    check_boundaries,
    gateway_calls,
    to_record,
    to_trajectory,
)

WORLD = load_world("shop")
SCENARIO = WORLD.scenario("refund-item-0004")
LOCAL = Principal("local", Scope.BUILD_AND_EVALUATE)


def _need_mcp() -> None:
    if importlib.util.find_spec("mcp") is None:
        if os.environ.get("REHEARSAL_REQUIRE_MCP") == "1":
            pytest.fail("REHEARSAL_REQUIRE_MCP=1 but the mcp extra is not installed: pip install -e '.[mcp]'")
        pytest.skip("the mcp extra is not installed (pip install -e '.[mcp]')")


@pytest.fixture
def solver() -> Iterator[ModelServer]:
    with ModelServer(world=WORLD) as server:
        yield server


def _play(tmp_path: Path, engine: TokenEngine | str, link: str, **sampling: Any) -> Path:
    """Play SCENARIO over MCP (in memory) with the engine (or the server at that base URL) behind the gateway
    (asking for token ids and logprobs); the run directory."""
    from mcp import Client

    from rehearsal_env.harness import EpisodeServerConfig, EpisodeSpec, Storage, drive, episode_runtime

    ledger = Ledger(tmp_path / "ledger")
    runtime = episode_runtime(EpisodeServerConfig(spec=EpisodeSpec(world=WORLD, scenario=SCENARIO,
                                                                   reward_profile="rl"),
                                                  who=LOCAL, ledger=ledger, link=link),
                              Storage(out=tmp_path / "runs"))
    upstream = engine if isinstance(engine, str) else engine.base_url
    config = GatewayConfig(upstream=upstream, ledger=ledger, logprobs=True, token_ids=True, timeout=180.0)
    model = "smollm2" if isinstance(engine, str) else "solver"

    async def main(url: str) -> Any:
        async with openai.AsyncOpenAI(base_url=f"{url}/episodes/{link}/v1", api_key="unused", max_retries=0) \
                as client, Client(runtime.server, mode="legacy") as mcp:  # in memory, the initialize handshake
            return await drive(mcp.session, client, model, instructions=mcp.instructions or "", **sampling)

    with ServerThread(gateway_app(config)) as gateway:
        played = anyio.run(main, gateway.url)
    runtime.close()
    assert played.ended is not None or isinstance(engine, str), "the solver plays the scenario to its end"
    return tmp_path / "runs" / "shop-rl"


def _export(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    assert main(["eval", "export", str(run_dir), "--format", "atif"]) == 0
    (path,) = sorted((run_dir / "atif").glob("*.json"))
    out = capsys.readouterr().out
    return json.loads(path.read_text()), out


def _with_ids(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in document["steps"] if (s.get("metrics") or {}).get("prompt_token_ids") is not None]


def test_a_gateway_episode_exports_the_engines_tokens_and_passes_the_boundary_check(
        solver: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _need_mcp()
    reference = SCENARIO.solution("reference").calls
    # the first reply makes the reference's first two calls at once: two steps, the second reporting no model call
    solver.script("solver", Reply.calls(*((c.tool, dict(c.args)) for c in reference[:2])))
    with TokenEngine(solver.base_url, EXACT_TEMPLATE) as engine:
        run_dir = _play(tmp_path, engine, "tokens-exact")
    (record,) = read_records(run_dir)
    document, out = _export(run_dir, capsys)
    trajectory = Trajectory.model_validate(document)  # the atif package's own models
    assert to_record(document) == record  # the round trip holds with the tokens in
    steps = _with_ids(document)
    assert len(steps) == len(engine.calls) == len(record.trace) - 1 >= 3
    for step, call in zip(steps, engine.calls, strict=True):  # each call's tokens, exactly as the engine had them
        assert step["metrics"]["prompt_token_ids"] == call.prompt_token_ids
        assert step["metrics"]["completion_token_ids"] == call.completion_token_ids
        assert step["metrics"]["logprobs"] == call.logprobs and all(lp < 0 for lp in call.logprobs)
        assert step["metrics"]["prompt_tokens"] == len(call.prompt_token_ids) and step["llm_call_count"] == 1
    # each call on the turn its reply led to; turn 2 came from the same reply as turn 1 and carries no call
    agent = [s for s in trajectory.steps if s.source == "agent"]
    assert [s.extra["rehearsal"]["turn"]["turn"] for s in agent] == [t.turn for t in record.trace]  # type: ignore[index]
    assert [s.llm_call_count for s in agent] == [1, None, *[1] * (len(agent) - 2)]
    assert agent[1].metrics is not None and agent[1].metrics.prompt_token_ids is None
    report = document["extra"]["rehearsal"]["token_boundaries"]
    assert report["verdict"] == EXACT and report["checked"] == len(engine.calls) - 1 and not report["drifts"]
    boundaries, made = len(engine.calls) - 1, len(engine.calls)
    assert f"token-exact: {boundaries} turn boundaries continue token for token over {made} model calls" in out

    # an in-process policy's own calls: one whose reply led to no step becomes a step of its own before the turn's
    calls = list(gateway_calls(run_dir, record))
    extra = ModelCall(index=1, turn=3, prompt_token_ids=(1, 2), completion_token_ids=(3,), logprobs=(-0.25,))
    placed = to_trajectory(record, calls=[calls[0], extra, *calls[1:]]).to_json_dict()
    agent_steps = [s for s in placed["steps"] if s["source"] == "agent"]
    assert len(agent_steps) == len(record.trace) + 1 and "tool_calls" not in agent_steps[2]
    assert agent_steps[2]["metrics"]["completion_token_ids"] == [3] and agent_steps[2]["metrics"]["logprobs"] == [-0.25]
    assert agent_steps[3]["extra"]["rehearsal"]["turn"]["turn"] == 3
    assert agent_steps[3]["metrics"]["prompt_token_ids"] == engine.calls[1].prompt_token_ids
    assert to_record(placed) == record

    # a run kept before the steps' calls were: no call placed on a turn, all carried apart, still checked
    for kept in (run_dir / "gateway").glob("*.turns.json"):
        kept.unlink()
    document, out = _export(run_dir, capsys)
    assert not _with_ids(document) and "token-exact" in out
    unplaced = document["extra"]["rehearsal"]["unplaced_model_calls"]
    assert [c["prompt_token_ids"] for c in unplaced] == [c.prompt_token_ids for c in engine.calls]
    assert all(c["turn"] is None for c in unplaced)


def test_a_prompt_re_tokenized_from_text_is_caught_as_drift(solver: ModelServer, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _need_mcp()
    with TokenEngine(solver.base_url, TEXT_TEMPLATE) as engine:
        run_dir = _play(tmp_path, engine, "tokens-text")
    document, out = _export(run_dir, capsys)
    Trajectory.model_validate(document)
    report = document["extra"]["rehearsal"]["token_boundaries"]
    assert report["verdict"] == DRIFT and len(report["drifts"]) == report["checked"] == len(engine.calls) - 1
    assert "token drift at" in out
    tokenizer = engine.tokenizer
    start = special(tokenizer, "<|im_start|>")
    for drift, before, after in zip(report["drifts"], engine.calls, engine.calls[1:], strict=False):
        # the same text, other tokens: the later prompt's text starts with the earlier prompt's and reply's
        said = tokenizer.decode(before.prompt_token_ids + before.completion_token_ids, skip_special_tokens=False)
        assert tokenizer.decode(after.prompt_token_ids, skip_special_tokens=False).startswith(said)
        # and the ids part at the turn boundary: in the reply's header ("assistant\n", after the earlier prompt's last
        # <|im_start|>), which merges with the reply's first text ("{") once tokenized with it
        opened = len(before.prompt_token_ids) - before.prompt_token_ids[::-1].index(start)
        assert opened <= drift["position"] < len(before.prompt_token_ids)


def test_a_streamed_answer_s_ids_are_logged_whole(solver: ModelServer, tmp_path: Path) -> None:
    """vLLM streams the prompt's ids in the first chunk and the completion's a chunk at a time: the gateway logs
    them and the call reads back whole, its logprobs aligned."""
    ledger = Ledger(tmp_path / "ledger")
    request: Any = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": SCENARIO.request}]
    with TokenEngine(solver.base_url, EXACT_TEMPLATE) as engine, ServerThread(gateway_app(GatewayConfig(
            upstream=engine.base_url, ledger=ledger, logprobs=True, token_ids=True))) as gateway:
        stream = openai.OpenAI(base_url=f"{gateway.url}/episodes/streamed/v1", api_key="unused").chat.completions\
            .create(model="solver", messages=request, stream=True)
        chunks = list(stream)
    assert len(chunks) == 2 and all(c.choices for c in chunks)  # the usage chunk the gateway asked for is not passed on
    (line,) = ledger.read("streamed")
    assert len(line["token_ids"]["token_ids"]) == 2  # logged a chunk at a time
    call, (made,) = call_from_line(0, None, line), engine.calls
    assert call.prompt_token_ids == tuple(made.prompt_token_ids) and call.note is None
    assert call.completion_token_ids == tuple(made.completion_token_ids) and call.logprobs == tuple(made.logprobs)
    assert call.completion_tokens == len(made.completion_token_ids)


def test_the_check_catches_a_bpe_merge_across_the_turn_boundary() -> None:
    """The tokenizer alone: a two-turn conversation whose next prompt is built from the engine's tokens passes;
    the same prompt tokenized again from its text does not, and the drift is where the first prompt ended."""
    tokenizer = train_tokenizer()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Use the tools."},
                                      {"role": "user", "content": "Hi, please refund order #2044."}]
    reply = {"role": "assistant", "content": "",
             "tool_calls": [{"function": {"name": "get_order", "arguments": '{"order_id": 2044}'}}]}
    prompt = render(messages, None, TEXT_TEMPLATE)
    first = tokenizer.encode(prompt).ids
    completion = tokenizer.encode(reply_text(reply)).ids + [special(tokenizer, "<|im_end|>")]
    assert tokenizer.encode(prompt + reply_text(reply)).ids[:len(first)] != first, \
        "the tokenizer merges across the boundary (else this test shows nothing)"
    result = [*messages, reply, {"role": "tool", "content": '{"status": "ok"}'}]
    rest = render(result, None, TEXT_TEMPLATE)[len(prompt) + len(reply_text(reply)) + len("<|im_end|>"):]
    kept = first + completion + tokenizer.encode(rest).ids  # what a token-exact engine holds
    again = tokenizer.encode(render(result, None, TEXT_TEMPLATE)).ids  # the whole conversation tokenized from its text
    assert tokenizer.decode(kept, skip_special_tokens=False) == tokenizer.decode(again, skip_special_tokens=False)

    def calls(second: list[int]) -> list[ModelCall]:
        return [ModelCall(0, 1, tuple(first), tuple(completion)), ModelCall(1, 2, tuple(second), (5,))]

    exact = check_boundaries(calls(kept))
    assert (exact.verdict, exact.checked, exact.drifts) == (EXACT, 1, ())
    drift = check_boundaries(calls(again))
    assert drift.verdict == DRIFT and drift.checked == 1
    (where,) = drift.drifts
    opened = len(first) - first[::-1].index(special(tokenizer, "<|im_start|>"))  # the reply's header starts here
    assert (where.call, where.turn) == (1, 2) and opened <= where.position < len(first)
    assert where.expected == tuple((first + completion)[where.position:where.position + 8])
    assert where.found == tuple(again[where.position:where.position + 8])
    assert "call 1 (turn 2)" in drift.describe() and f"at token {where.position}" in drift.describe()


def test_a_call_without_ids_breaks_the_chain_and_a_prompt_that_stops_short_drifts() -> None:
    a = ModelCall(0, 1, (1, 2), (3,))
    b = ModelCall(1, 2, None, None)
    c = ModelCall(2, 3, (1, 2, 3, 4), (5,))
    none = check_boundaries([a, b, c])
    assert (none.verdict, none.calls, none.with_ids, none.checked) == (UNCHECKED, 3, 2, 0)
    short = check_boundaries([a, ModelCall(1, 2, (1, 2), (9,))])  # the reply's token is missing from the prompt
    (where,) = short.drifts
    assert short.verdict == DRIFT and (where.position, where.expected, where.found) == (2, (3,), ())
    assert check_boundaries([a, c]).verdict == EXACT


def test_a_ledger_line_gives_only_what_the_provider_sent_well() -> None:
    streamed = {"status": "ok", "usage": {"prompt_tokens": 3, "completion_tokens": 3},
                "token_ids": {"prompt_token_ids": [[1, 2, 3], None], "token_ids": [[4], [5, 6], None]},
                "logprobs": [{"content": [{"logprob": -0.5}]}, {"content": [{"logprob": -1.0}, {"logprob": 0}]}],
                "finish_reasons": ["stop"]}
    call = call_from_line(0, 1, streamed)
    assert (call.prompt_token_ids, call.completion_token_ids, call.logprobs) == ((1, 2, 3), (4, 5, 6),
                                                                                (-0.5, -1.0, 0.0))
    assert (call.prompt_tokens, call.completion_tokens, call.note) == (3, 3, None)
    for bad in ([[1, True]], [[-1]], [[2**40]], [["7"]], [7]):
        hostile = call_from_line(0, 1, {**streamed, "token_ids": {"prompt_token_ids": bad, "token_ids": [[4]]}})
        assert hostile.prompt_token_ids is None and hostile.completion_token_ids == (4,)
        assert hostile.note is not None and "integers" in hostile.note
    for value in (0.5, math.nan, "x", True):
        hostile = call_from_line(0, 1, {**streamed, "logprobs": [{"content": [{"logprob": value}]}]})
        assert hostile.logprobs is None and hostile.note is not None and "finite number" in hostile.note
    two = call_from_line(0, 1, {**streamed, "finish_reasons": ["stop", "stop"]})
    assert two.completion_token_ids is None and two.logprobs is None and "n > 1" in str(two.note)
    differing = call_from_line(0, 1, {**streamed, "token_ids": {"prompt_token_ids": [[1], [2]]}})
    assert differing.prompt_token_ids is None and "different prompt token ids" in str(differing.note)
    bare = call_from_line(3, None, {"status": "provider_failed", "usage": None})
    assert (bare.prompt_token_ids, bare.logprobs, bare.status, bare.note) == (None, None, "provider_failed", None)


def test_kept_calls_are_read_as_input(tmp_path: Path) -> None:
    """What lies in a run directory is read with bounds: lines that are not JSON objects are left out, a turns file
    that does not say how many calls each step reported places no call, an oversized file is refused, an id that
    names no file reads as no calls."""
    keep_calls(tmp_path, "ep_1", [{"call": 0, "status": "ok"}, {"call": 1, "status": "ok"}], [1, 1])
    kept = read_kept(tmp_path, "ep_1")
    assert kept is not None and kept.calls_per_turn == (1, 1) and [c["call"] for c in kept.lines] == [0, 1]
    calls_file, turns_file = tmp_path / "gateway" / "ep_1.jsonl", tmp_path / "gateway" / "ep_1.turns.json"
    calls_file.write_text('{"call": 0}\nnot json\n[1, 2]\n' + "[" * 100_000 + "\n")
    turns_file.write_text('{"calls_per_turn": [1, -1]}')
    kept = read_kept(tmp_path, "ep_1")
    assert kept is not None and kept.lines == ({"call": 0},) and kept.calls_per_turn is None
    for name in ("../ep_1", ".hidden", "a/b"):
        assert read_kept(tmp_path, name) is None
    with calls_file.open("r+b") as f:
        f.truncate(MAX_KEPT_BYTES + 1)  # sparse: no disk
    with pytest.raises(ValueError, match="expected at most"):
        read_kept(tmp_path, "ep_1")


def test_an_episode_not_played_through_the_gateway_exports_as_before(tmp_path: Path) -> None:
    run(RunConfig(world="shop", agent="reference", scenarios=(SCENARIO.id,)), tmp_path / "plain")
    (record,) = read_records(tmp_path / "plain")
    assert gateway_calls(tmp_path / "plain", record) == ()
    document = to_trajectory(record, calls=gateway_calls(tmp_path / "plain", record)).to_json_dict()
    assert "token_boundaries" not in document["extra"]["rehearsal"] and not _with_ids(document)
    assert document == to_trajectory(record).to_json_dict()


def test_the_tiny_real_model_s_logprobs_are_exported_and_its_missing_ids_leave_the_check_unchecked(
        live_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """SmolLM2 behind llama.cpp's OpenAI server (``rehearsal models serve``; the ``live`` extra, skips without it
    unless ``REHEARSAL_REQUIRE_LIVE_MODEL=1``) through the gateway: it returns logprobs but no token ids (and takes
    ``return_token_ids`` without refusing), so the export carries the model's own logprobs and the check says
    ``unchecked``, never ``exact``."""
    _need_mcp()
    run_dir = _play(tmp_path, live_server, "tokens-live", max_calls=1, temperature=0.0, seed=0, max_tokens=48,
                    tool_choice={"type": "function", "function": {"name": "find_customer"}})
    document, out = _export(run_dir, capsys)
    Trajectory.model_validate(document)
    report = document["extra"]["rehearsal"]["token_boundaries"]
    assert report["verdict"] == UNCHECKED and report["with_ids"] == 0 and report["calls"] >= 1
    assert "unchecked: 0 of" in out
    logprobs = [s["metrics"]["logprobs"] for s in document["steps"] if (s.get("metrics") or {}).get("logprobs")]
    assert logprobs and all(lp <= 0 for step in logprobs for lp in step)
    for step in document["steps"]:
        metrics = step.get("metrics") or {}
        if metrics.get("logprobs"):  # one logprob a generated token (llama.cpp's own count)
            assert len(metrics["logprobs"]) == metrics["completion_tokens"]
