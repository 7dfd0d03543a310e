"""Agent profiles: what was evaluated, named and versioned.

A profile is one version of an agent: its kind (``openai`` for a model behind an
OpenAI-compatible API, or a built-in scripted agent), its model, its
instructions and its sampling parameters. It is a small TOML file::

    name = "support-bot"
    agent = "openai"                 # or reference, null, wrong:<name>
    model = "gpt-4o-mini"
    instructions = "Check the order before any refund."
    max_model_calls = 40             # optional: the agent gives up when they are spent
    context = 8192                   # optional: the model's context in tokens (see below)
    max_call_s = 60.0                # optional: the longest one model call may run (see below)

    [sampling]                       # every key optional; left out: the provider's default
    temperature = 0.0
    top_p = 1.0
    seed = 7
    max_tokens = 512

    [provider]                       # every key optional: what the provider needs to be sent
    tool_choice = "auto"             # auto (the default), required, none, or omit (never sent)
    parallel_tool_calls = false      # left out: not sent
    stream = true                    # stream replies (the default); false for a server that cannot
    extra_body = { top_k = 40 }      # more fields for the request body, sent as given

    [price]                          # optional: per million tokens, for measure's cost per episode
    input_per_million = 0.15
    output_per_million = 0.60

The ``[provider]`` options (and the ``[price]``) are part of the profile's version: the same model offered
its tools differently is a different agent. ``tool_choice`` is sent whenever tools
are (OpenAI-compatible servers such as llama-cpp-python's ``chatml-function-calling``
leave the tools out of the prompt without it).

Limits the agent enforces on its side (:mod:`._openai`): a streamed reply is cut
off past ``max_tokens`` chunks or ``max_call_s`` seconds (the model's runaway: a
rejected attempt, scored), and a prompt over ``context`` tokens (estimated
conservatively, :func:`prompt_tokens`) is never sent: the agent gives up saying so.

Reading a profile file: :mod:`._profile_file`; registered versions and references (``NAME@vN``):
:mod:`._profile_store`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .._home import AGENT_PROFILES_ENV
from .._version import __version__

PROFILES_ENV = AGENT_PROFILES_ENV
"""The variable naming the folder of registered profiles (:mod:`._profile_store`)."""
DEFAULT_INSTRUCTIONS = (
    "Work through the tools one call at a time. Read before you write, follow the policies, and finish "
    "with the finish tool (put the answer to a question in its answer argument); use give_up when the "
    "request cannot be done."
)
"""The instructions of an ``openai:MODEL`` agent given without a profile."""


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters sent with every model call; None leaves the provider's default."""

    temperature: float | None = None
    """Sampling temperature, 0 to 2."""
    top_p: float | None = None
    """Nucleus sampling mass, in (0, 1]."""
    seed: int | None = None
    """The provider's sampling seed (best effort on most providers); each episode sends it plus the episode's
    reset seed, so repeat ``k`` (reset with ``seed + k``) samples its own replies, the same on every rerun."""
    max_tokens: int | None = None
    """Most tokens one reply may have; a reply cut off there is a rejected attempt."""

    def request_params(self) -> dict[str, Any]:
        """The set parameters, as keyword arguments of ``chat.completions.create``."""
        return {k: v for k, v in self.to_dict().items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed,
                "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class Provider:
    """What the provider needs to be sent besides sampling (``[provider]``; part of the profile's version)."""

    tool_choice: str = "auto"
    """``auto``, ``required`` or ``none``, sent with the tools; ``omit`` sends no ``tool_choice``."""
    parallel_tool_calls: bool | None = None
    """Sent when set (None: not sent, the provider's default)."""
    stream: bool = True
    """Stream replies, so that the agent cuts a runaway off at ``max_tokens`` or ``max_call_s``; false for a
    server that cannot stream tool calls (e.g. llama-cpp-python's ``chatml-function-calling``)."""
    extra_body: str = "{}"
    """More request-body fields, as canonical JSON text of an object (sent as given)."""

    def request_params(self, with_tools: bool) -> dict[str, Any]:
        """The request-body fields these options add (``tool_choice`` only when tools are offered)."""
        out: dict[str, Any] = dict(json.loads(self.extra_body))
        if with_tools and self.tool_choice != "omit":
            out["tool_choice"] = self.tool_choice
        if with_tools and self.parallel_tool_calls is not None:
            out["parallel_tool_calls"] = self.parallel_tool_calls
        return out

    def to_dict(self) -> dict[str, Any]:
        """The options that differ from the defaults (what the content hash and the TOML hold)."""
        out: dict[str, Any] = {}
        if self.tool_choice != "auto":
            out["tool_choice"] = self.tool_choice
        if self.parallel_tool_calls is not None:
            out["parallel_tool_calls"] = self.parallel_tool_calls
        if not self.stream:
            out["stream"] = False
        extra = json.loads(self.extra_body)
        if extra:
            out["extra_body"] = extra
        return out


@dataclass(frozen=True)
class Price:
    """What the model's tokens cost, per million (measure's cost per episode); part of the version's content."""

    input_per_million: float
    """Price of a million input (prompt) tokens."""
    output_per_million: float
    """Price of a million output (completion) tokens."""


@dataclass(frozen=True)
class AgentProfile:
    """One version of an agent: what a record says was evaluated."""

    name: str
    """The profile's name (a built-in agent's profile is named after the agent)."""
    agent: str = "openai"
    """``openai`` (a model over an OpenAI-compatible API), ``reference``, ``null`` or ``wrong:<name>``."""
    model: str | None = None
    """The model name sent to the provider (``openai`` profiles only)."""
    instructions: str = ""
    """Added to the system message after the world's policies and the role."""
    sampling: Sampling = field(default_factory=Sampling)
    """Sampling parameters of every model call."""
    max_model_calls: int | None = None
    """Most model calls per episode; when they are spent the agent gives up (scored). None: no cap."""
    context: int | None = None
    """The model's context in tokens: a prompt estimated over it is not sent (the agent gives up saying so).
    None: no limit checked on our side."""
    max_call_s: float | None = None
    """The longest one model call may run while the provider answers; past it the reply is cut off (the
    model's runaway, a rejected attempt). None: the endpoint's timeout."""
    provider: Provider = field(default_factory=Provider)
    """What the provider needs to be sent: ``tool_choice``, ``parallel_tool_calls``, streaming, extra fields."""
    version: int | None = None
    """The registered version (1, 2, ...); None for a built-in or not yet registered profile."""
    price: Price | None = None
    """Prices per million input and output tokens (``[price]``); None: not declared (measure gives no cost)."""

    @property
    def content_hash(self) -> str:
        """SHA-256 (first 12 hex digits) of what the version covers: everything but the version."""
        blob = json.dumps(self._content(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    @property
    def label(self) -> str:
        """The version as records store it: ``vN``, ``builtin-<package version>`` or ``unregistered-<hash>``."""
        if self.version is not None:
            return f"v{self.version}"
        if is_builtin(self.agent):
            return f"builtin-{__version__}"
        return f"unregistered-{self.content_hash}"

    @property
    def ref(self) -> str:
        """``NAME@vN`` (or the name alone when unversioned)."""
        return f"{self.name}@v{self.version}" if self.version is not None else self.name

    def _content(self) -> dict[str, Any]:
        content: dict[str, Any] = {"name": self.name, "agent": self.agent, "model": self.model,
                                   "instructions": self.instructions, "sampling": self.sampling.to_dict()}
        if self.max_model_calls is not None:
            content["max_model_calls"] = self.max_model_calls
        if self.context is not None:
            content["context"] = self.context
        if self.max_call_s is not None:
            content["max_call_s"] = self.max_call_s
        provider = self.provider.to_dict()
        if provider:  # left out when default, so profiles without [provider] keep their hash
            content["provider"] = provider
        if self.price is not None:  # left out when undeclared, so profiles without [price] keep their hash
            content["price"] = {"input_per_million": self.price.input_per_million,
                                "output_per_million": self.price.output_per_million}
        return content

    def to_toml(self) -> str:
        """The profile as TOML text (what ``vN.toml`` holds)."""
        lines = [f"name = {json.dumps(self.name)}", f"agent = {json.dumps(self.agent)}"]
        if self.model is not None:
            lines.append(f"model = {json.dumps(self.model)}")
        lines.append(f"instructions = {json.dumps(self.instructions)}")
        if self.max_model_calls is not None:
            lines.append(f"max_model_calls = {self.max_model_calls}")
        if self.context is not None:
            lines.append(f"context = {self.context}")
        if self.max_call_s is not None:
            lines.append(f"max_call_s = {json.dumps(float(self.max_call_s))}")
        if self.version is not None:
            lines.append(f"version = {self.version}")
        params = self.sampling.request_params()
        if params:
            lines += ["", "[sampling]"] + [f"{k} = {json.dumps(v)}" for k, v in params.items()]
        provider = self.provider.to_dict()
        if provider:
            lines += ["", "[provider]"] + [f"{k} = {_toml_value(v)}" for k, v in provider.items()]
        if self.price is not None:
            lines += ["", "[price]", f"input_per_million = {json.dumps(float(self.price.input_per_million))}",
                      f"output_per_million = {json.dumps(float(self.price.output_per_million))}"]
        return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    """A TOML value for JSON-like ``value`` (an object as an inline table; JSON strings are TOML strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if value is None:
        raise ValueError("TOML has no null; leave the key out of [provider] extra_body instead")
    return json.dumps(value)


def is_builtin(agent: str) -> bool:
    return agent in ("reference", "null") or agent.startswith("wrong:")


def builtin_profile(agent: str) -> AgentProfile:
    """The profile of a built-in scripted agent (``reference``, ``null``, ``wrong:<name>``)."""
    if not is_builtin(agent):
        raise KeyError(f"{agent!r} is not a built-in agent; built-in agents are reference, null, wrong:<name>")
    return AgentProfile(name=agent, agent=agent)


def model_profile(model: str) -> AgentProfile:
    """The unregistered profile of ``--agent openai:MODEL``: that model, default instructions and sampling."""
    return AgentProfile(name=f"openai:{model}", agent="openai", model=model, instructions=DEFAULT_INSTRUCTIONS)
