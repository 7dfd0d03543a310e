"""The prompt a local ChatML model is given for an OpenAI chat request with tools, and its reply read back.

``rehearsal models serve`` (:mod:`._local_server`) renders every request with :func:`render` and reads every
generated reply with :func:`parse_reply`. Pure Python, no model needed, so what a model is shown is tested
on its own:

- **the tools, with their descriptions**: each tool's whole OpenAI schema (name, description, parameters)
  as one JSON line inside ``<tools>`` in the system turn, *after* the system message's text, so every
  request of a run shares the system text as its first tokens (the server's prompt cache keeps it);
- **tool results**: each ``role: "tool"`` message is a ``<tool_response>`` block in a user turn (consecutive
  results share one turn);
- **the model's own calls**: an assistant message's ``tool_calls`` as one ``<tool_call>[...]</tool_call>``
  block, a JSON list of ``{"name", "arguments"}`` (SmolLM2's function-calling format; a single object is
  read too, as Qwen and Hermes models write it);
- **text as sent**: nothing is HTML-escaped, and non-ASCII stays as it is (``ensure_ascii=False``).
"""

from __future__ import annotations

import json
import re
from typing import Any

START = "<|im_start|>"
END = "<|im_end|>"
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
MAX_CALLS = 16
"""Most tool calls taken from one reply (the rest of the text stays content)."""
TOOLS_PREAMBLE = "# Tools\n\nYou have access to the following tools:\n<tools>[\n"
TOOLS_POSTAMBLE = (
    "\n]</tools>\n\nTo call tools, reply with only this, and no other text:\n<tool_call>[\n"
    "{\"name\": <tool-name>, \"arguments\": <arguments-json-object>}\n"
    "]</tool_call>\nEach tool's result comes back inside <tool_response></tool_response> tags.")
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _text(content: Any) -> str:
    """A message's content as text (OpenAI content parts: their ``text`` joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def tools_block(tools: list[dict[str, Any]]) -> str:
    """The tool list as the system turn ends with it (empty for no tools)."""
    if not tools:
        return ""
    return TOOLS_PREAMBLE + ",\n".join(_json(t.get("function", t)) for t in tools) + TOOLS_POSTAMBLE


def _arguments(raw: Any) -> Any:
    """Call arguments as an object when they are JSON text (OpenAI sends text), else as given."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _assistant(message: dict[str, Any]) -> str:
    calls = [{"name": (c.get("function") or {}).get("name"),
              "arguments": _arguments((c.get("function") or {}).get("arguments"))}
             for c in message.get("tool_calls") or ()]
    parts = [_text(message.get("content"))]
    if calls:
        parts.append(CALL_OPEN + "[\n" + ",\n".join(_json(c) for c in calls) + "\n]" + CALL_CLOSE)
    return "\n".join(p for p in parts if p)


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
           add_generation_prompt: bool = True) -> str:
    """``messages`` and ``tools`` as the ChatML prompt the model reads (ending with the assistant's opening)."""
    turns: list[tuple[str, str]] = []
    system = ""
    rest = messages
    if messages and messages[0].get("role") in ("system", "developer"):
        system, rest = _text(messages[0].get("content")), messages[1:]
    block = tools_block(list(tools or []))
    if system or block:
        turns.append(("system", "\n\n".join(p for p in (system, block) if p)))
    for message in rest:
        role = message.get("role")
        if role == "tool":
            response = f"<tool_response>\n{_text(message.get('content'))}\n</tool_response>"
            if turns and turns[-1][0] == "user" and turns[-1][1].endswith("</tool_response>"):
                turns[-1] = ("user", turns[-1][1] + "\n" + response)
            else:
                turns.append(("user", response))
        elif role == "assistant":
            turns.append(("assistant", _assistant(message)))
        else:
            turns.append(("system" if role in ("system", "developer") else "user", _text(message.get("content"))))
    out = "".join(f"{START}{role}\n{text}{END}\n" for role, text in turns)
    return out + (f"{START}assistant\n" if add_generation_prompt else "")


def _called(body: Any) -> list[dict[str, Any]] | None:
    """The calls in one ``<tool_call>`` block's JSON: a list of ``{"name", "arguments"}`` or one of them."""
    items = body if isinstance(body, list) else [body]
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    return items


def parse_reply(text: str) -> tuple[str, list[dict[str, Any]]]:
    """``(content, tool_calls)`` of a generated reply: each well-formed ``<tool_call>`` block holding a list of
    ``{"name": str, "arguments": object}`` (or one of them) gives OpenAI tool calls; everything else (a
    malformed block included) is content, so the agent sees what the model wrote."""
    calls: list[dict[str, Any]] = []
    rest: list[str] = []
    last = 0
    for match in _CALL.finditer(text):
        try:
            found = _called(json.loads(match[1]))
        except ValueError:
            continue
        if found is None or len(calls) + len(found) > MAX_CALLS:
            continue
        for body in found:
            calls.append({"id": f"call_{len(calls)}", "type": "function",
                          "function": {"name": body["name"], "arguments": _json(body.get("arguments", {}))}})
        rest.append(text[last:match.start()])
        last = match.end()
    rest.append(text[last:])
    return "".join(rest).strip(), calls


def safe_prefix(text: str) -> int:
    """How much of a reply being generated can be streamed as content now: up to its first ``<tool_call>``,
    holding back an ending that may be the start of one."""
    found = text.find(CALL_OPEN)
    if found >= 0:
        return found
    for k in range(len(CALL_OPEN) - 1, 0, -1):
        if text.endswith(CALL_OPEN[:k]):
            return len(text) - k
    return len(text)
