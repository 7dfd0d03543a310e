"""A profile's TOML file, read against its declaration: unknown keys, types and ranges are errors that name
the key, the file and the line, and say what was expected (the format: :mod:`._profile`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._declared import read_toml, validated
from ._profile import AgentProfile, Price, Provider, Sampling, is_builtin

AGENT_KINDS = ("openai", "reference", "null", "wrong:<name>")
"""What a profile's ``agent`` may be."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
"""A profile's name: a letter or digit, then letters, digits, ``_ . : -``; at most 100 characters."""
TOOL_CHOICES = ("auto", "required", "none", "omit")
"""What ``[provider] tool_choice`` may be (``omit``: the key is not sent at all)."""
MAX_EXTRA_BODY_CHARS = 10_000
"""Longest ``[provider] extra_body`` as JSON."""
RESERVED_BODY_KEYS = frozenset({"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream",
                                "stream_options", "temperature", "top_p", "seed", "max_tokens"})
"""Request fields the profile sets elsewhere; ``extra_body`` may not name them."""


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
