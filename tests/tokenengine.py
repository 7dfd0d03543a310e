"""A token engine for tests: an OpenAI-protocol server on 127.0.0.1 that answers with the token ids and logprobs of
what it read and wrote, as vLLM does with ``return_token_ids`` and ``logprobs``, streamed or not.

What to say is decided by another OpenAI-protocol server (``upstream``, e.g. the scripted
:class:`~rehearsal_env.agents.testing.ModelServer`, whose solver plays the scenario's reference), over real HTTP.
This server renders the conversation with a chat template, tokenizes it with a real byte-level BPE tokenizer
(``tokenizers``, trained here, deterministically, on rendered conversations), takes the reply's tokens as the
upstream reply's text tokenized followed by ``<|im_end|>``, and scores each under a bigram model of the training
corpus (add-one smoothed): a real log-probability of a real, tiny model.

Two templates (:data:`EXACT_TEMPLATE` and :data:`TEXT_TEMPLATE`):

- ``exact``: a message's header ends with the special token ``<|sep|>``, so the tokenizer never merges across the
  point where the reply starts: the next prompt, tokenized whole from its text, is the previous prompt, the reply's
  tokens and the new messages' tokens, token for token (what a token-exact engine keeps);
- ``text``: the header ends with a newline, and this tokenizer merges ``"\\n{"`` (a newline before a JSON tool
  call; no pre-tokenizer splits them): the next prompt, tokenized whole from its text, holds the merged token where
  the previous prompt ended with ``"\\n"`` and the reply began with ``"{"``. Re-tokenization drift.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EXACT_TEMPLATE = "exact"
TEXT_TEMPLATE = "text"
SPECIALS = ("<|im_start|>", "<|im_end|>", "<|sep|>")
VOCAB = 640


def _corpus() -> Iterator[str]:
    """Rendered conversation pieces (headers, JSON tool calls and results, requests), without special tokens."""
    tools = ("find_customer", "get_order", "list_orders", "refund_item", "finish", "ask_customer")
    for i in range(300):
        name = tools[i % len(tools)]
        yield f'assistant\n{{"name": "{name}", "arguments": {{"order_id": {1000 + i}, "email": "c{i}@example.com"}}}}'
        yield f'tool\n{{"status": "ok", "tool": "{name}", "result": {{"id": {i}, "total_cents": {i * 37}}}}}'
        yield f"user\nHi, this is customer {i}. The item in order #{2000 + i} arrived broken. Please refund it."
        yield "system\nUse the tools. Read the customer's orders before you refund anything."


def train_tokenizer() -> Tokenizer:
    """The engine's byte-level BPE (no pre-tokenizer split: merges may cross any text boundary)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(list(_corpus()), trainer)
    return tokenizer


def special(tokenizer: Tokenizer, name: str) -> int:
    """The id of one of :data:`SPECIALS`."""
    found = tokenizer.token_to_id(name)
    if found is None:
        raise KeyError(f"expected the special token {name!r} in the tokenizer's vocabulary")
    return int(found)


def reply_text(message: dict[str, Any]) -> str:
    """An assistant message's text as the template writes it: its content, then each call as JSON."""
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        text += f'{{"name": {json.dumps(function.get("name"))}, "arguments": {function.get("arguments") or "{}"}}}'
    return text


def render(messages: list[dict[str, Any]], tools: Any, template: str) -> str:
    """The prompt's text: each message under its header, the tools after the system text, then the reply's header."""
    sep = "<|sep|>" if template == EXACT_TEMPLATE else "\n"
    after = "" if template == EXACT_TEMPLATE else "\n"
    out = []
    for message in messages:
        role = str(message.get("role"))
        text = reply_text(message)
        if role == "system" and tools:
            text += "\nTools: " + json.dumps(tools, sort_keys=True)
        out.append(f"<|im_start|>{role}{sep}{text}<|im_end|>{after}")
    return "".join(out) + f"<|im_start|>assistant{sep}"


@dataclass
class Bigram:
    """Add-one smoothed bigram log-probabilities of the tokenizer's corpus."""

    tokenizer: Tokenizer
    pairs: Counter[tuple[int, int]] = field(default_factory=Counter)
    firsts: Counter[int] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        for text in _corpus():
            ids = self.tokenizer.encode(text).ids
            self.pairs.update(zip(ids, ids[1:], strict=False))
            self.firsts.update(ids[:-1])

    def logprobs(self, before: int | None, ids: list[int]) -> list[float]:
        size = self.tokenizer.get_vocab_size()
        out = []
        for token in ids:
            seen = self.pairs[(before, token)] if before is not None else 0
            out.append(math.log((seen + 1) / ((self.firsts[before] if before is not None else 0) + size)))
            before = token
        return out


@dataclass(frozen=True)
class EngineCall:
    """What the engine read and wrote for one request."""

    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float]


class TokenEngine:
    """The engine on 127.0.0.1 (a context manager); :attr:`calls` holds what it read and wrote, in order."""

    def __init__(self, upstream: str, template: str = EXACT_TEMPLATE) -> None:
        self.upstream, self.template = upstream.rstrip("/"), template
        self.tokenizer = train_tokenizer()
        self.bigram = Bigram(self.tokenizer)
        self.end = special(self.tokenizer, "<|im_end|>")
        self.calls: list[EngineCall] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> TokenEngine:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The completion of a request (not streamed)."""
        asked = {k: body.pop(k, None) for k in ("logprobs", "top_logprobs", "return_token_ids", "stream",
                                                "stream_options")}
        answer = httpx.post(f"{self.upstream}/chat/completions", json=body, timeout=60.0)
        reply: dict[str, Any] = answer.json()
        if answer.status_code != 200:
            return answer.status_code, reply
        choice = reply["choices"][0]
        prompt = self.tokenizer.encode(render(body["messages"], body.get("tools"), self.template)).ids
        completion = self.tokenizer.encode(reply_text(choice["message"])).ids + [self.end]
        logprobs = self.bigram.logprobs(prompt[-1] if prompt else None, completion)
        self.calls.append(EngineCall(prompt, completion, logprobs))
        reply["usage"] = {"prompt_tokens": len(prompt), "completion_tokens": len(completion),
                          "total_tokens": len(prompt) + len(completion)}
        if asked["return_token_ids"]:
            reply["prompt_token_ids"] = prompt
            choice["token_ids"] = completion
        if asked["logprobs"]:
            choice["logprobs"] = {"refusal": None, "content": [
                {"token": self.tokenizer.id_to_token(t), "logprob": lp, "bytes": None, "top_logprobs": []}
                for t, lp in zip(completion, logprobs, strict=True)]}
        return 200, reply

    def chunks(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """A streamed answer, as vLLM streams one: the prompt's ids in the first chunk, the completion's ids and
        logprobs split over two chunks (the message in the first), then the finish reason and usage."""
        status, reply = self.answer(body)
        if status != 200:
            yield reply
            return
        choice, half = reply["choices"][0], max(1, len(self.calls[-1].completion_token_ids) // 2)
        ids, logprobs = choice.get("token_ids"), (choice.get("logprobs") or {}).get("content")
        common = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        for n, part in enumerate((slice(None, half), slice(half, None))):
            piece: dict[str, Any] = {"index": 0, "finish_reason": None if n == 0 else choice["finish_reason"],
                                     "delta": {} if n else {k: v for k, v in choice["message"].items() if v}}
            if ids is not None:
                piece["token_ids"] = ids[part]
            if logprobs is not None:
                piece["logprobs"] = {"content": logprobs[part], "refusal": None}
            first = {"prompt_token_ids": reply["prompt_token_ids"]} if n == 0 and "prompt_token_ids" in reply else {}
            yield {**common, **first, "choices": [piece]}
        yield {**common, "choices": [], "usage": reply["usage"]}


def _handler(engine: TokenEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            if body.get("stream") is True:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for chunk in engine.chunks(body):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                return
            status, out = engine.answer(body)
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
