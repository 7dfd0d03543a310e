"""What ``rehearsal models serve`` shows a local model, and how it streams, tested without a model.

The rendering (:mod:`rehearsal_env.agents._chatml`) is pure Python; the chat handler
(:mod:`rehearsal_env.agents._local_server`) is driven here by a stand-in for ``llama_cpp.Llama`` that replays
scripted tokens, so streaming, the held-back ``<tool_call>``, ``max_tokens`` and a client that leaves are
checked on every machine. ``tests/test_live_model.py`` serves the real model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from rehearsal_env.agents._chatml import parse_reply, render, safe_prefix
from rehearsal_env.agents._local_server import STATUS, collect, handler
from rehearsal_env.cli import main

TOOLS = [{"type": "function", "function": {
    "name": "get_order", "description": "Read one order: its items, status and payment.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]}}}]
RESULT = json.dumps({"status": "ok", "result": {"marker": "TOOL-RESULT-7"}})
CONVERSATION = [
    {"role": "system", "content": "You work in world shop."},
    {"role": "user", "content": "I'd like a refund for order 3294 — it's \"broken\" & late."},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "get_order", "arguments": json.dumps({"order_id": 3294})}}]},
    {"role": "tool", "tool_call_id": "c1", "content": RESULT},
]


def test_the_prompt_shows_tools_with_descriptions_results_and_unescaped_text() -> None:
    prompt = render(CONVERSATION, TOOLS)
    assert "Read one order: its items, status and payment." in prompt  # the description
    assert f"<tool_response>\n{RESULT}\n</tool_response>" in prompt
    assert "I'd like a refund for order 3294 — it's \"broken\" & late." in prompt  # not &#39; nor \u2014
    assert "&#" not in prompt and "\\u" not in prompt
    assert '<tool_call>[\n{"name": "get_order", "arguments": {"order_id": 3294}}\n]</tool_call>' in prompt
    assert prompt.startswith("<|im_start|>system\nYou work in world shop.\n\n# Tools")  # the shared prefix first
    assert prompt.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>tool" not in prompt  # a result is never an empty turn of a role the model does not know


def test_consecutive_results_share_one_turn_and_no_tools_no_tool_block() -> None:
    two = [*CONVERSATION, {"role": "tool", "tool_call_id": "c2", "content": "second"}]
    prompt = render(two, TOOLS)
    assert prompt.count("<|im_start|>user\n<tool_response>") == 1 and prompt.count("<tool_response>\n") == 2
    assert "# Tools" not in render(CONVERSATION[:2], None)


def test_a_reply_is_read_back_as_calls_and_text() -> None:
    content, calls = parse_reply('Checking.\n<tool_call>\n{"name": "get_order", "arguments": {"order_id": 5}}\n'
                                 '</tool_call>')
    assert content == "Checking." and calls[0]["function"] == {"name": "get_order", "arguments": '{"order_id": 5}'}
    content, calls = parse_reply('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]'
                                 '</tool_call>')  # SmolLM2's list
    assert content == "" and [c["function"]["name"] for c in calls] == ["a", "b"]
    content, calls = parse_reply("<tool_call>{not json}</tool_call>")
    assert calls == [] and content == "<tool_call>{not json}</tool_call>"  # the model sees what it wrote
    assert safe_prefix("Sure <tool") == len("Sure ") and safe_prefix("plain text") == len("plain text")


class FakeLlama:
    """Replays scripted tokens as ``llama_cpp.Llama.create_completion(stream=True)`` does."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.asked: dict[str, Any] = {}
        self.generated = 0

    def tokenize(self, text: bytes, special: bool = False) -> list[int]:
        return list(range(len(text.split())))

    def create_completion(self, prompt: str, stream: bool, stop: list[str], **params: Any) -> Iterator[dict[str, Any]]:
        self.asked = {"prompt": prompt, "stop": stop, **params}
        limit = params.get("max_tokens") or len(self.tokens)
        for n, token in enumerate(self.tokens[:limit]):
            self.generated += 1
            last = n == min(limit, len(self.tokens)) - 1
            finish = ("length" if limit < len(self.tokens) else "stop") if last else None
            yield {"id": "x", "created": 0, "model": "m", "choices": [{"text": token, "finish_reason": finish}]}


CALL_TOKENS = ["Let ", "me ", "check", ". ", "<tool", "_call>", '{"name": "get_order", ',
               '"arguments": {"order_id": 5}}', "</tool_call>"]


def test_a_streamed_reply_shows_text_and_then_the_call_with_usage() -> None:
    llama = FakeLlama(CALL_TOKENS)
    chunks = list(handler(llama, CONVERSATION, TOOLS, stream=True, max_tokens=64, temperature=0.0))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "Let me check. "  # "<tool" was held back, never shown as text
    calls = [c for ch in chunks for c in ch["choices"][0]["delta"].get("tool_calls") or ()]
    assert calls[0]["function"]["name"] == "get_order" and calls[0]["index"] == 0
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["completion_tokens"] == len(CALL_TOKENS)
    assert llama.asked["max_tokens"] == 64 and "<|im_end|>" in llama.asked["stop"]
    assert "TOOL-RESULT-7" in llama.asked["prompt"]


def test_max_tokens_holds_for_the_whole_reply_calls_included() -> None:
    llama = FakeLlama(CALL_TOKENS)
    reply = handler(llama, CONVERSATION, TOOLS, stream=False, max_tokens=6)
    assert llama.generated == 6 and reply["choices"][0]["finish_reason"] == "length"
    assert "tool_calls" not in reply["choices"][0]["message"]  # cut inside the call: nothing to run
    assert reply["usage"]["completion_tokens"] == 6


def test_a_client_that_leaves_stops_the_generation() -> None:
    llama = FakeLlama(["word "] * 500)
    before = STATUS.to_dict()["stopped_by_client"]
    stream = handler(llama, CONVERSATION, TOOLS, stream=True)
    for _, _chunk in zip(range(3), stream, strict=False):
        pass
    stream.close()  # what the server's publisher does when the client has gone
    assert llama.generated == 3  # one token a chunk: nothing more was generated
    status = STATUS.to_dict()
    assert status["stopped_by_client"] == before + 1 and status["running"] == 0
    assert status["last"]["stopped_by_client"] and status["last"]["completion_tokens"] == 3


def test_a_reply_not_streamed_is_one_completion() -> None:
    reply = collect(handler(FakeLlama(["Hello", " there"]), CONVERSATION[:2], None, stream=True))
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "Hello there"}
    assert reply["choices"][0]["finish_reason"] == "stop"


def test_serve_refuses_a_missing_file_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "serve", "/nonexistent/model.gguf"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected a GGUF model file or one of smollm2" in err
    json.dumps(err)


def test_tool_choice_required_starts_the_reply_with_a_call_of_one_of_the_tools() -> None:
    from rehearsal_env.agents._local_server import call_schema, opening

    assert opening(TOOLS, "required") == "<tool_call>[\n" and opening(TOOLS, "auto") == ""
    assert opening(None, "required") == ""
    named = opening(TOOLS, {"type": "function", "function": {"name": "get_order"}})
    assert named.endswith('{"name": "get_order", "arguments": ')
    (only,) = call_schema(TOOLS)["anyOf"]
    assert only["properties"]["name"] == {"const": "get_order"}
    assert only["properties"]["arguments"]["required"] == ["order_id"]
    llama = FakeLlama(['{"name": "get_order", "arguments": {"order_id": 5}}', "\n]</tool_call>"])
    reply = collect(handler(llama, CONVERSATION[:2], TOOLS, stream=True, tool_choice="required"))
    assert llama.asked["prompt"].endswith("<|im_start|>assistant\n<tool_call>[\n")
    assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"order_id": 5}'


def test_the_prompt_docs_models_shows_is_what_render_prints(capsys: pytest.CaptureFixture[str]) -> None:
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    block = re.search(r"```python\n(from rehearsal_env.agents._chatml import render\n.*?)```", page, re.S)
    shown = re.search(r"prints\n\n```text\n(.*?)```", page, re.S)
    assert block is not None and shown is not None
    exec(block.group(1), {})
    assert capsys.readouterr().out == shown.group(1) + "\n"


def test_openais_json_schema_form_is_read_as_llama_cpp_pythons() -> None:
    """``rehearsal models serve`` takes OpenAI's structured-output form (which llama-cpp-python's server refuses
    with 422) as llama-cpp-python's own; every other body passes unchanged, byte for byte."""
    from rehearsal_env.agents._schema_form import rewritten

    schema = {"type": "object", "properties": {"legs": {"type": "integer"}}}
    openai_form = {"model": "m", "messages": [], "response_format": {
        "type": "json_schema", "json_schema": {"name": "cat", "schema": schema, "strict": True}}}
    assert json.loads(rewritten(json.dumps(openai_form).encode())) == {
        "model": "m", "messages": [], "response_format": {"type": "json_object", "schema": schema}}
    for body in (b'{"model": "m", "response_format": {"type": "json_object"}}', b"not json", b"[1, 2]",
                 b'{"response_format": "json_schema"}'):
        assert rewritten(body) == body


def test_the_rewritten_request_reaches_the_server_whole_with_its_new_length() -> None:
    """The middleware in front of llama-cpp-python's server: a chat request arrives rewritten, with a
    ``content-length`` that fits it; any other path passes untouched."""
    import anyio
    import httpx

    from rehearsal_env.agents._schema_form import SchemaForm

    seen: list[tuple[str, bytes, bytes | None]] = []

    async def server(scope: dict[str, Any], receive: Any, send: Any) -> None:  # stands in for llama-cpp-python's
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        seen.append((scope["path"], body, dict(scope["headers"]).get(b"content-length")))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    form = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=SchemaForm(server)),
                                     base_url="http://local") as client:
            await client.post("/v1/chat/completions", json={"model": "m", "response_format": form})
            await client.post("/v1/completions", json={"model": "m", "response_format": form})

    anyio.run(main)
    (chat, body, length), (other, untouched, _) = seen
    assert chat == "/v1/chat/completions" and length == str(len(body)).encode()
    assert json.loads(body)["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
    assert other == "/v1/completions" and json.loads(untouched)["response_format"] == form
