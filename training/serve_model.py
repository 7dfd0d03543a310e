"""Serve a GGUF file with llama-cpp-python's OpenAI-compatible server, in the chat template the model trained in.

    python training/serve_model.py --model runs/learn/sft.gguf --port 8000 [--n_threads 2 ...]

The arguments are llama-cpp-python's own (``python -m llama_cpp.server --help``); this launcher only adds the
chat format ``qwen3-tools`` and selects it: the prompt is TRL's Qwen3 ChatML template with the request's tools
(rendered by transformers' own Jinja renderer, so a conversation the runner's ``openai`` agent sends becomes the
very text ``tokenizer.apply_chat_template`` gave SFT and GRPO), and the reply's ``<tool_call>{json}</tool_call>``
blocks become OpenAI ``tool_calls`` (read by the same :func:`rehearsal_env.agents._chatml.parse_reply` as
``rehearsal models serve``). llama.cpp's ``chatml-function-calling`` format cannot serve a trained
model: it renders no tool results (a ``tool`` message becomes an empty turn). Decoding has no repeat penalty
(the server's default is 1.1), as in training. Streaming is refused: set ``[provider] stream = false``.

This launcher is for a model *trained here* (its prompt must be the training template, which needs the
``trl`` extra). To play an off-the-shelf GGUF model, use the documented path, ``rehearsal models serve GGUF``
(docs/models.md): it needs only the ``live`` extra, streams, and stops a generation whose client leaves.

:func:`served` starts it on a free port of 127.0.0.1 and waits until it answers.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rehearsal_env.agents._chatml import parse_reply

__all__ = ["FORMAT", "parse_reply", "render", "served"]

FORMAT = "qwen3-tools"


def _plain_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant tool-call arguments as objects (OpenAI sends JSON text; the template writes an object as JSON)."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            message = {**message, "tool_calls": [
                {**c, "function": {**c["function"], "arguments": _as_object(c["function"].get("arguments"))}}
                for c in calls]}
        out.append(message)
    return out


def _as_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
           add_generation_prompt: bool = True) -> str:
    """``messages`` with ``tools`` in TRL's Qwen3 template (ending with the assistant's opening by default): what
    the server prompts with, and what SFT trains on."""
    from transformers.utils.chat_template_utils import render_jinja_template
    from trl.chat_template_utils import qwen3_chat_template

    rendered: Any = render_jinja_template(conversations=[_plain_arguments(messages)], tools=list(tools or []) or None,
                                        chat_template=qwen3_chat_template,
                                        add_generation_prompt=add_generation_prompt)
    return str(rendered[0][0])  # (rendered conversations, generation indices)


def qwen3_tools(llama: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                temperature: float = 0.2, top_p: float = 0.95, top_k: int = 40, min_p: float = 0.05,
                stream: bool = False, max_tokens: int | None = None, seed: int | None = None,
                **_: Any) -> dict[str, Any]:
    """llama-cpp-python's chat-completion handler for the ``qwen3-tools`` format."""
    if stream:
        raise ValueError("the qwen3-tools format does not stream: set [provider] stream = false in the profile")
    if seed is not None:
        llama.set_seed(seed)
    done: Any = llama.create_completion(prompt=render(messages, tools), temperature=temperature, top_p=top_p,
                                        top_k=top_k, min_p=min_p, max_tokens=max_tokens, stop=["<|im_end|>"],
                                        repeat_penalty=1.0, stream=False)
    choice = done["choices"][0]
    content, calls = parse_reply(choice["text"])
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls and choice["finish_reason"] == "stop" else choice["finish_reason"]
    return {"id": "chat" + done["id"], "object": "chat.completion", "created": done["created"],
            "model": done["model"], "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                 "logprobs": None}], "usage": done["usage"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(model: str | Path, log: str | Path, n_ctx: int = 8192, threads: int = 2,
           wait_s: float = 180.0) -> Iterator[str]:
    """Serve ``model`` on 127.0.0.1 for the ``with`` block; yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    port = _free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, __file__, "--model", str(model), "--host", "127.0.0.1",
                                 "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
                                 "--n_threads_batch", str(threads)], stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the model server exited with {proc.returncode}: "
                                   f"{Path(log).read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the model server did not answer in {wait_s:.0f} s (log {log})") from None
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    from llama_cpp import llama_chat_format
    from llama_cpp.server.__main__ import main as server_main

    llama_chat_format.register_chat_completion_handler(FORMAT)(qwen3_tools)
    if "--chat_format" not in sys.argv:
        sys.argv += ["--chat_format", FORMAT]
    server_main()


if __name__ == "__main__":
    main()
