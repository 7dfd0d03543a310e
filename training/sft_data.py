"""SFT examples for learn.py: train scenarios' reference solutions, as the served model will see them.

Each train scenario's reference is played by the ordinary runner with the ``openai`` agent against the scripted
OpenAI-protocol server (``rehearsal_env.agents.testing.ModelServer``, whose solver answers each request with the
reference's next call, retrying a refused call as the reference says). The run is a run directory like any
other; every episode must end ``verified`` (never teach what the checks reject). The last request of each
episode holds the whole conversation exactly as the agent sends it to a model (system prompt, tools, the
customer's words, tool results); with the solver's last reply appended it is rendered by
:func:`serve_model.render` (the text the served model is prompted with) and tokenized, the loss on the
assistant's replies only (``assistant_masks``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from serve_model import render

import rehearsal_env
from rehearsal_env.agents import AgentProfile, Endpoint
from rehearsal_env.agents.testing import ModelServer
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run

__all__ = ["reference_conversations", "sft_examples"]

_END = "<|im_end|>"
_AFTER = {"role": "user", "content": "(end)"}
"""A user turn rendered after a conversation, so that no assistant reply is the template's last (Qwen3's
template gives only the last one an empty think block, which the server's prompts never have)."""


def reference_conversations(world: rehearsal_env.World, ids: list[str], profile: AgentProfile,
                            run_dir: Path) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """``(messages, tools)`` per train scenario in ``ids``: the reference played through the ``openai`` agent."""
    scripted = replace(profile, model="reference-solver", version=None)
    with ModelServer(world=world) as server:
        run(RunConfig(world=world.name, agent=scripted.name, agent_version=scripted.label, split="train",
                      scenarios=tuple(ids), agent_profile=scripted.to_toml(),
                      endpoint=Endpoint(base_url=server.base_url, max_retries=0)), run_dir)
        bad = [(r.scenario, r.outcome) for r in read_records(run_dir) if r.outcome != "verified"]
        if bad:
            raise SystemExit(f"learn.py: error: references of train scenarios played through the openai agent are not "
                             f"verified: {bad}; fix those references (run {run_dir}) before training on them")
        episodes: list[dict[str, Any]] = []
        for body in list(server.requests):  # one episode at a time: a request extends its predecessor's messages
            if episodes and body["messages"][: len(episodes[-1]["messages"])] == episodes[-1]["messages"]:
                episodes[-1] = body
            else:
                episodes.append(body)
        out = []
        for body in episodes:
            reply = server.answer(body).body(scripted.model or "", 0)["choices"][0]["message"]
            reply["content"] = reply.get("content") or ""
            out.append(([*body["messages"], reply], body.get("tools") or []))
    if len(out) != len(ids):
        raise SystemExit(f"learn.py: error: expected {len(ids)} reference conversations, got {len(out)} "
                         "(episodes were not played one at a time?)")
    return out


def sft_examples(tokenizer: Any, conversations: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]],
                 ) -> list[dict[str, Any]]:
    """Tokenized examples: ``input_ids`` of the whole conversation, ``assistant_masks`` 1 on each assistant reply
    (its tool call and ``<|im_end|>``), exactly as it follows the prompt the server renders for that turn."""
    examples = []
    for messages, tools in conversations:
        text, spans = "", []
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            prompt = render(messages[:i], tools)
            after = render([*messages[: i + 1], _AFTER], tools, add_generation_prompt=False)
            if not (prompt.startswith(text) and after.startswith(prompt)):
                raise ValueError(f"the chat template renders turn {i} differently once later turns follow")
            segment = after[len(prompt):]
            segment = segment[: segment.index(_END) + len(_END)]
            spans.append((len(prompt), len(prompt) + len(segment)))
            text = prompt + segment
        encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        mask = [int(any(a <= s and e <= b for a, b in spans)) for s, e in encoded["offset_mapping"]]
        examples.append({"input_ids": list(encoded["input_ids"]), "assistant_masks": mask})
    return examples
