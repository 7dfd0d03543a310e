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

Registering a profile (:meth:`ProfileStore.register`, ``rehearsal profile add FILE``)
stores it as ``ROOT/NAME/vN.toml``. The same content again returns the version it
already has; a changed profile under an existing name becomes the next version.
Stored versions never change. ``ROOT`` is ``$REHEARSAL_AGENT_PROFILES``, else
``agent_profiles/`` in the state home (``$REHEARSAL_HOME``, else ``~/.rehearsal``; see
:mod:`rehearsal_env._home`), like ``world_versions/``.

A reference names a profile: ``NAME`` (its latest version) or ``NAME@vN``. The
built-in scripted agents (``reference``, ``null``, ``wrong:<name>``) have built-in
profiles (:func:`builtin_profile`) and are never stored.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._atomic import write_atomic
from .._declared import read_toml, validated
from .._home import agent_profiles
from .._version import __version__

PROFILES_ENV = "REHEARSAL_AGENT_PROFILES"
DEFAULT_ROOT = "agent_profiles"
AGENT_KINDS = ("openai", "reference", "null", "wrong:<name>")
"""What a profile's ``agent`` may be."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
_REF = re.compile(r"^(?P<name>.+?)@v(?P<version>[0-9]+)$")
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


TOOL_CHOICES = ("auto", "required", "none", "omit")
"""What ``[provider] tool_choice`` may be (``omit``: the key is not sent at all)."""
MAX_EXTRA_BODY_CHARS = 10_000
"""Longest ``[provider] extra_body`` as JSON."""
RESERVED_BODY_KEYS = frozenset({"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream",
                                "stream_options", "temperature", "top_p", "seed", "max_tokens"})
"""Request fields the profile sets elsewhere; ``extra_body`` may not name them."""


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


class _SamplingFile(BaseModel):
    """``[sampling]`` of a profile file."""

    model_config = ConfigDict(extra="forbid", strict=True)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    max_tokens: int | None = Field(default=None, ge=1)


class _ProviderFile(BaseModel):
    """``[provider]`` of a profile file."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tool_choice: str = "auto"
    parallel_tool_calls: bool | None = None
    stream: bool = True
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @field_validator("tool_choice")
    @classmethod
    def _choice(cls, choice: str) -> str:
        if choice not in TOOL_CHOICES:
            raise ValueError(f"expected provider.tool_choice to be one of {', '.join(TOOL_CHOICES)}, got {choice!r}")
        return choice

    @field_validator("extra_body")
    @classmethod
    def _body(cls, body: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(set(body) & RESERVED_BODY_KEYS)
        if clash:
            raise ValueError(f"provider.extra_body may not set {clash}: the profile sets them elsewhere "
                             "([sampling], [provider] tool_choice, parallel_tool_calls, stream)")
        text = json.dumps(body, sort_keys=True, default=str)
        if len(text) > MAX_EXTRA_BODY_CHARS:
            raise ValueError(f"expected provider.extra_body under {MAX_EXTRA_BODY_CHARS} characters as JSON, "
                             f"got {len(text)}")
        if json.loads(text) != body:
            raise ValueError("expected provider.extra_body to hold JSON values only (strings, numbers, booleans, "
                             "arrays, tables); dates and times are not sent as given")
        return body


class _PriceFile(BaseModel):
    """``[price]`` of a profile file: both prices, per million tokens."""

    model_config = ConfigDict(extra="forbid", strict=True)
    input_per_million: float = Field(ge=0, allow_inf_nan=False)
    output_per_million: float = Field(ge=0, allow_inf_nan=False)


class _ProfileFile(BaseModel):
    """An agent profile file: every key, its type and its bounds (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(pattern=_NAME.pattern)
    agent: str = "openai"
    model: str | None = None
    instructions: str = ""
    sampling: _SamplingFile = Field(default_factory=_SamplingFile)
    max_model_calls: int | None = Field(default=None, ge=1)
    context: int | None = Field(default=None, ge=16)
    max_call_s: float | None = Field(default=None, gt=0)
    provider: _ProviderFile = Field(default_factory=_ProviderFile)
    version: int | None = Field(default=None, ge=1, exclude=True)
    price: _PriceFile | None = None

    @field_validator("agent")
    @classmethod
    def _agent(cls, agent: str) -> str:
        if not (agent == "openai" or is_builtin(agent)):
            raise ValueError(f"expected agent to be one of {', '.join(AGENT_KINDS)}, got {agent!r}")
        return agent

    @model_validator(mode="after")
    def _model(self) -> _ProfileFile:
        if self.agent == "openai" and not self.model:
            raise ValueError(f'an openai profile needs model = "MODEL NAME", got {self.model!r}')
        if self.agent != "openai" and self.model is not None:
            raise ValueError(f"a built-in {self.agent!r} profile has no model; remove model = {self.model!r}")
        return self


_MESSAGES = {
    "name": 'expected name = "..." (letters, digits, _ . : -; at most 100), got {got}',
    "instructions": "expected instructions to be a string, got {got}",
    "max_model_calls": "expected max_model_calls to be a positive integer, got {got}",
    "version": "expected version to be a positive integer, got {got}",
    "context": "expected context to be the model's context in tokens (an integer >= 16), got {got}",
    "max_call_s": "expected max_call_s to be seconds > 0, got {got}",
    "sampling": "expected a [sampling] table, got {got}",
    "sampling.temperature": "expected sampling.temperature in [0, 2] (a number), got {got}",
    "sampling.top_p": "expected sampling.top_p in (0, 1] (a number), got {got}",
    "sampling.seed": "expected sampling.seed to be an integer, got {got}",
    "sampling.max_tokens": "expected sampling.max_tokens to be an integer >= 1, got {got}",
    "provider": "expected a [provider] table, got {got}",
    "provider.parallel_tool_calls": "expected provider.parallel_tool_calls to be true or false, got {got}",
    "provider.stream": "expected provider.stream to be true or false, got {got}",
    "provider.extra_body": "expected provider.extra_body to be a table, got {got}",
    "price": "expected a [price] table with input_per_million and output_per_million, got {got}",
    "price.input_per_million": "expected price.input_per_million to be a price per million tokens >= 0, got {got}",
    "price.output_per_million": "expected price.output_per_million to be a price per million tokens >= 0, got {got}",
}
"""The wording of each key's error (what the hand-written checks said before the profile was declared)."""


def parse_profile(text: str, source: str = "profile") -> AgentProfile:
    """A profile from TOML text, checked against its declaration (:class:`_ProfileFile`: unknown keys, types
    and ranges say what was expected, with the file and line).

    Raises:
        ValueError: ``SOURCE:LINE: ...``: the text is not a valid profile; the message names the key and how
            to fix it.
    """
    data = validated(_ProfileFile, read_toml(text, source), text=text, source=source, messages=_MESSAGES)
    s, p = data.sampling, data.provider
    return AgentProfile(name=data.name, agent=data.agent, model=data.model, instructions=data.instructions,
                        sampling=Sampling(s.temperature, s.top_p, s.seed, s.max_tokens),
                        max_model_calls=data.max_model_calls, context=data.context,
                        max_call_s=float(data.max_call_s) if data.max_call_s is not None else None,
                        provider=Provider(tool_choice=p.tool_choice, parallel_tool_calls=p.parallel_tool_calls,
                                          stream=p.stream, extra_body=json.dumps(p.extra_body, sort_keys=True)),
                        version=data.version,
                        price=None if data.price is None else Price(float(data.price.input_per_million),
                                                                    float(data.price.output_per_million)))


def load_profile_file(path: str | Path) -> AgentProfile:
    """A profile from a TOML file (not registered: its version is what the file says, usually none)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"no agent profile file {str(p)!r}; expected a TOML file with name, model, "
                                "instructions and [sampling]") from None
    return parse_profile(text, str(p))


class ProfileStore:
    """Registered profiles under ``root``: ``root/NAME/vN.toml``, never rewritten."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root else agent_profiles()  # $REHEARSAL_AGENT_PROFILES, else in the state home

    def _dir(self, name: str) -> Path:
        return self.root / name.replace(":", "_")

    def register(self, profile: AgentProfile) -> tuple[AgentProfile, bool]:
        """Store ``profile``; return (the stored version, True) or (the existing version, False) when
        its latest version already has the same content.

        Raises:
            ValueError: a built-in agent's profile (they are not stored).
        """
        if is_builtin(profile.agent) and profile.name == profile.agent:
            raise ValueError(f"{profile.name!r} is a built-in agent's profile and is not registered; "
                             "give the profile another name")
        folder = self._dir(profile.name)
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder / ".lock")):
            versions = self.versions(profile.name)
            unversioned = replace(profile, version=None)
            if versions and replace(versions[-1], version=None) == unversioned:
                return versions[-1], False
            stored = replace(profile, version=len(versions) + 1)
            path = folder / f"v{stored.version}.toml"
            write_atomic(path, stored.to_toml())
            return stored, True

    def versions(self, name: str) -> list[AgentProfile]:
        """Every stored version of ``name``, oldest first (empty when none)."""
        folder = self._dir(name)
        if not folder.is_dir():
            return []
        found = []
        for path in folder.glob("v*.toml"):
            if re.fullmatch(r"v[0-9]+", path.stem):
                found.append(parse_profile(path.read_text(), str(path)))
        return sorted(found, key=lambda p: p.version or 0)

    def names(self) -> list[str]:
        """The names of every registered profile, sorted."""
        if not self.root.is_dir():
            return []
        out = []
        for folder in self.root.iterdir():
            versions = self.versions(folder.name) if folder.is_dir() else []
            if versions:
                out.append(versions[-1].name)
        return sorted(out)

    def get(self, ref: str) -> AgentProfile:
        """The profile a reference names: ``NAME`` (latest version) or ``NAME@vN``.

        Raises:
            KeyError: no such profile or version, naming what is registered.
        """
        match = _REF.match(ref)
        name, wanted = (match["name"], int(match["version"])) if match else (ref, None)
        versions = self.versions(name)
        if not versions:
            known = ", ".join(self.names()) or "none"
            raise KeyError(f"no agent profile {name!r} in {self.root}; registered: {known}. "
                           "Register one with `rehearsal profile add FILE.toml`")
        if wanted is None:
            return versions[-1]
        for p in versions:
            if p.version == wanted:
                return p
        raise KeyError(f"agent profile {name!r} has versions v1..v{len(versions)}, not v{wanted}")


def resolve_agent(spec: str, store: ProfileStore | None = None) -> AgentProfile:
    """The profile an ``--agent`` value names: a built-in agent, ``openai:MODEL`` or a registered ``NAME[@vN]``."""
    if is_builtin(spec):
        return builtin_profile(spec)
    if spec.startswith("openai:"):
        model = spec.removeprefix("openai:")
        if not model:
            raise ValueError("expected --agent openai:MODEL with a model name, got 'openai:'")
        return model_profile(model)
    try:
        return (store or ProfileStore()).get(spec)
    except KeyError as exc:
        raise KeyError(f"unknown agent {spec!r}: not a built-in agent (reference, null, wrong:<name>), not "
                       f"openai:MODEL, and not a registered profile ({exc.args[0]})") from None
