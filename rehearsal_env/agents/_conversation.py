"""One episode's chat with a model, without I/O: observations in, chat messages and env actions out
(:class:`Conversation`; the agents of :mod:`._openai` send its requests).

How a reply becomes env actions:

- **system message**: what every scenario shares first, this episode last (:mod:`._prompt`). The
  customer's messages arrive as **user** messages; ``info["tools"]`` are the request's ``tools``, sent
  with the profile's ``[provider]`` options (``tool_choice``, by default ``"auto"``; see :mod:`._profile`).
- **each tool call is one env step.** Parallel tool calls run one at a time, in
  order; each call id gets its ``role: "tool"`` answer (the tool result as JSON).
  When the episode ends mid-batch, the calls that never ran are answered
  ``{"status": "not_run"}`` in :meth:`Conversation.transcript`.
- **a reply with text and no tool call** goes to the customer as
  ``ask_customer(question=TEXT)`` while the scenario allows another customer
  contact (``Scenario.max_customer_contacts``, counting every ``ask_customer`` the
  agent sent); after that it is ``finish(message=TEXT)``: the model has said its
  last word to a customer it may not interrupt again.
- **malformed replies are rejected attempts**, never crashes, each with its *kind*
  (:data:`REJECTED_KINDS`, kept per turn in :attr:`Conversation.rejections` and stored in the record's
  trace as ``rejected_kind``): a call whose arguments are not JSON, or that names a tool the episode
  does not offer, stays in the chat history with a tool message saying what was wrong (the model did
  make that call). A reply that was cut off (by the provider at ``max_tokens``, or by the agent, see
  :mod:`._reply`) or had neither text nor a call is *not* put in the history: no call stands in for
  it. The env gets an action it rejects (tool ``""``, its ``args`` recording what the model said, its
  usage counted), and the next request alone ends with a user message from the environment saying what
  happened (:data:`NOTE_PREFIX`).
- **usage**: each reply's ``usage.total_tokens`` rides on the first action made from
  that reply (``"usage": {"tokens": N}``). A reply without usage reports nothing, so a
  provider that never reports usage leaves ``tokens`` null and ``efficiency``
  unmeasured (the external-mode caveat), and :attr:`._openai.ModelStats.replies_without_usage`
  counts the gaps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._profile import AgentProfile
from ._prompt import given, prompt_tokens, system_prompt, tool_content, tools_text
from ._reply import CUT_OFF_TIME, CUT_OFF_TOKENS, ModelReply

MAX_RAW = 2000
"""Characters of a malformed reply kept in the rejected action."""
NOT_RUN = {"status": "not_run", "error": "the episode ended before this call ran"}
SEED_RANGE = 2**31
"""Provider seeds are ``(sampling.seed + the episode's reset seed) % SEED_RANGE`` (an OpenAI seed is an int32)."""
NOTE_PREFIX = "[From the environment, not the customer] "
"""How the one-request note about a dropped reply starts."""
REJECTED_KINDS = {
    "cut_off_length": "the provider ended the reply at max_tokens (finish_reason 'length'); nothing in it ran",
    CUT_OFF_TOKENS: "the streamed reply ran past the profile's max_tokens and the agent cut it off",
    CUT_OFF_TIME: "the reply ran past the profile's max_call_s while the provider answered; the agent cut it off",
    "malformed_json": "a tool call's arguments were not JSON",
    "unknown_tool": "a tool call named a tool this episode does not offer",
    "empty_reply": "the reply had neither text nor a tool call (or no choice at all)",
    "invalid_action": "the environment refused a call the agent passed on (arguments, role, ...; see the turn's "
                      "observation)",
}
"""Why a model's attempt was rejected: the record's ``Turn.rejected_kind``."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def reply_usage(reply: ModelReply) -> dict[str, int] | None:
    """The env action's ``usage`` for a reply: its total tokens, split into input and output where the provider
    split them (None: it reported none)."""
    if reply.tokens is None:
        return None
    if reply.input_tokens is None or reply.output_tokens is None:
        return {"tokens": reply.tokens}
    return {"tokens": reply.tokens, "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}


def action_text(tool: str, args: Any, usage: dict[str, int] | None) -> str:
    """The env action JSON (ASCII) for one call, with the reply's usage (:func:`reply_usage`) when given."""
    action: dict[str, Any] = {"tool": tool, "args": args}
    if usage is not None:
        action["usage"] = usage
    return json.dumps(action)


def dropped_action(kind: str, reply: ModelReply, server: dict[str, Any] | None = None) -> str:
    """The action that stands for a reply with no usable call: the env rejects it (no tool is named ``""``),
    after counting the reply's usage; its ``args`` record what the model said and why it was dropped, and for a
    reply the agent cut off, what waiting for the server found (``server``, :mod:`._drain`)."""
    said: dict[str, Any] = {"kind": kind, "text": reply.text[:MAX_RAW]}
    if server is not None:
        said["server"] = server
    if reply.calls:
        said["calls"] = [{"name": c["name"][:200], "arguments": c["arguments"][:MAX_RAW]} for c in reply.calls[:8]]
    return action_text("", {"dropped_reply": said}, reply_usage(reply))


@dataclass
class _Pending:
    """One env action made from the model's reply, waiting to be sent, and how to answer it."""

    action: str
    call_id: str | None
    """The tool call it answers (None: it came from plain text, or from a reply kept out of the history)."""
    problem: str | None = None
    """Why the agent knows the env will reject it (shown to the model with the env's answer)."""
    to_customer: bool = False
    kind: str | None = None
    """The rejected attempt's kind (:data:`REJECTED_KINDS`) when the agent knows it will be rejected."""


class Conversation:
    """One episode's chat: observations in, chat messages and env actions out (no I/O here).

    Args:
        profile: The agent profile (model, instructions, sampling, provider options).
        max_customer_contacts: How many ``ask_customer`` calls the scenario allows (plain text
            goes to the customer while fewer were sent).
    """

    def __init__(self, profile: AgentProfile, *, max_customer_contacts: int = 1) -> None:
        self.profile = profile
        self.max_customer_contacts = max_customer_contacts
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.turn = 0
        """Env steps asked of this agent so far (the turn the current action is for)."""
        self.rejections: dict[int, str] = {}
        """The kind of each rejected attempt the agent made knowingly, by turn."""
        self._tool_names: set[str] = set()
        self._queue: list[_Pending] = []
        self._sent: _Pending | None = None
        self._note: str | None = None
        """Said to the model in the next request only (a dropped reply's problem); never in the history."""
        self._waiting: list[str] = []
        """Customer messages that arrived mid-batch; they follow the batch's tool messages."""
        self._contacts = 0
        self._episode_seed = 0
        """The episode's reset seed (``info["seed"]``), added to the profile's sampling seed."""

    # -- observations in ---------------------------------------------------------
    def next_action(self, observation: str, info: dict[str, Any]) -> str | None:
        """Take the env's observation; the next action of the current reply, or None: ask the model."""
        self.turn += 1
        obs = json.loads(observation)
        if not self.messages:
            self._start(info)
        else:
            self._answer(obs.get("tool_result"), obs.get("turns_left"))
        self._waiting.extend(str(m) for m in obs.get("messages") or ())
        if self._queue:
            return self._send(self._queue.pop(0))
        self.messages.extend({"role": "user", "content": m} for m in self._waiting)
        self._waiting = []
        return None

    def _start(self, info: dict[str, Any]) -> None:
        self._episode_seed = int(info.get("seed") or 0)
        self.tools = list(info.get("tools") or [])
        self._tool_names = {t["function"]["name"] for t in self.tools}
        self.messages.append({"role": "system", "content": system_prompt(self.profile.instructions, info)})

    @property
    def system(self) -> str:
        """The system message (empty before the first observation)."""
        return str(self.messages[0]["content"]) if self.messages else ""

    def given(self) -> dict[str, tuple[str, str]]:
        """What the model was given, by content hash: ``{"system": (hash, text), "tools": (hash, JSON text)}``."""
        return given(self.system, self.tools)

    def _answer(self, result: dict[str, Any] | None, turns_left: Any) -> None:
        sent, self._sent = self._sent, None
        if sent is None:
            return
        body = dict(result or {})
        body.pop("tool", None)
        if sent.to_customer:
            answer = (body.get("result") or {}).get("answer") if body.get("status") == "ok" else None
            self.messages.append({"role": "user", "content": answer if isinstance(answer, str) else _dumps(body)})
            return
        if sent.call_id is None:  # a dropped reply: the note says what happened, nothing goes in the history
            return
        if sent.problem is not None:
            body = {"status": body.get("status", "rejected"), "problem": sent.problem, "environment": body}
        self.messages.append({"role": "tool", "tool_call_id": sent.call_id, "content": tool_content(body, turns_left)})

    def _send(self, pending: _Pending) -> str:
        self._sent = pending
        if pending.kind is not None:
            self.rejections[self.turn] = pending.kind
        if pending.to_customer:
            self._contacts += 1
        elif pending.call_id is not None and pending.problem is None:
            if json.loads(pending.action).get("tool") == "ask_customer":
                self._contacts += 1
        return pending.action

    # -- the model's reply in ------------------------------------------------------
    def request(self) -> dict[str, Any]:
        """The JSON body of the next model call (``stream`` is added by the transport, :mod:`._reply`)."""
        messages = list(self.messages)
        if self._note is not None:
            messages.append({"role": "user", "content": NOTE_PREFIX + self._note})
        request: dict[str, Any] = {**self.profile.provider.request_params(bool(self.tools)),
                                   "model": self.profile.model, "messages": messages,
                                   **self.profile.sampling.request_params()}
        if "seed" in request:  # each repeat (reset with seed + k) samples its own replies, reproducibly
            request["seed"] = (request["seed"] + self._episode_seed) % SEED_RANGE
        if self.tools:
            request["tools"] = self.tools
        return request

    def wanted_tokens(self) -> int:
        """The next request's prompt tokens, estimated erring high (:func:`._prompt.prompt_tokens`), plus its
        ``max_tokens`` (0 when unset)."""
        return prompt_tokens(self.request()["messages"], self.tools) + (self.profile.sampling.max_tokens or 0)

    def over_context(self) -> str | None:
        """Why the next request does not fit the profile's ``context`` (None: it fits, or no context is set)."""
        context = self.profile.context
        if context is None:
            return None
        prompt = prompt_tokens(self.request()["messages"], self.tools)
        reply = self.profile.sampling.max_tokens or 0
        if prompt + reply <= context:
            return None
        return (f"the prompt does not fit the model's context: about {prompt} tokens (estimated, erring high; "
                f"system message {len(self.system)} characters, {len(self.tools)} tool schemas "
                f"{len(tools_text(self.tools))} characters) plus max_tokens {reply} is over the profile's context "
                f"of {context} tokens, so the agent gives up without sending it (a larger context, fewer tools or "
                "shorter policies would fit)")

    def take(self, reply: ModelReply, server: dict[str, Any] | None = None) -> str:
        """The first env action of the model's reply (the rest queue up behind it); ``server``: what waiting for
        the server after a cut-off reply found (recorded in the dropped action)."""
        self._note = None
        tokens = reply_usage(reply)
        if reply.cut is not None or reply.finish_reason == "length":
            kind = reply.cut or "cut_off_length"
            limit = (f"max_call_s ({self.profile.max_call_s} s)" if kind == CUT_OFF_TIME
                     else f"max_tokens ({self.profile.sampling.max_tokens})")
            return self._drop(kind, reply, f"your last reply ran past {limit} and was cut off, so nothing in it "
                                           "was run. Reply with one short, complete tool call.", server)
        if not reply.choices or (not reply.calls and not reply.text.strip()):
            return self._drop("empty_reply", reply, "your last reply had neither text nor a tool call. Reply with "
                                                    "one tool call.")
        entry: dict[str, Any] = {"role": "assistant", "content": reply.text}  # a string: llama.cpp refuses null
        if reply.calls:
            entry["tool_calls"] = [
                {"id": c["id"] or f"call_{len(self.messages)}_{n}", "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}} for n, c in enumerate(reply.calls)]
        self.messages.append(entry)
        if reply.calls:
            self._queue = [self._call(c, tokens if n == 0 else None) for n, c in enumerate(entry["tool_calls"])]
        else:
            text = reply.text
            tool = "ask_customer" if self._contacts < self.max_customer_contacts else "finish"
            args = {"question": text} if tool == "ask_customer" else {"message": text}
            self._queue = [_Pending(action_text(tool, args, tokens), None, to_customer=tool == "ask_customer")]
        return self._send(self._queue.pop(0))

    def _drop(self, kind: str, reply: ModelReply, note: str, server: dict[str, Any] | None = None) -> str:
        self._note = note
        self._queue = []
        return self._send(_Pending(dropped_action(kind, reply, server), None, problem=note, kind=kind))

    def _call(self, call: dict[str, Any], tokens: dict[str, int] | None) -> _Pending:
        call_id, name, raw = call["id"], call["function"]["name"], call["function"]["arguments"]
        try:
            args = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            return _Pending(action_text(name, raw[:MAX_RAW], tokens), call_id, kind="malformed_json",
                            problem=f"the arguments of {name!r} are not valid JSON ({exc}); nothing was run. "
                                    "Send the arguments as one JSON object")
        if name in self._tool_names:
            return _Pending(action_text(name, args, tokens), call_id)
        return _Pending(action_text(name, args, tokens), call_id, kind="unknown_tool",
                        problem=f"there is no tool {name!r}; nothing was run")

    def give_up(self, reason: str) -> str:
        """The action that ends the episode on the agent's own account (a refused request, a spent budget,
        a prompt over the context)."""
        self.messages.append({"role": "assistant", "content": reason})
        self._sent = None
        return action_text("give_up", {"reason": reason}, None)

    # -- the end ---------------------------------------------------------------------
    def transcript(self) -> list[dict[str, Any]]:
        """The chat so far, with every tool call answered (calls the episode never ran: ``not_run``)."""
        out = list(self.messages)
        for pending in ([self._sent] if self._sent else []) + self._queue:
            if pending.call_id is not None:
                out.append({"role": "tool", "tool_call_id": pending.call_id, "content": _dumps(NOT_RUN)})
        return out
