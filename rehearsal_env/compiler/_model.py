"""Phase 7 with ``--model``: a model proposes jobs through the ``openai`` SDK, and repairs the ones the gate refused.

Any OpenAI-compatible endpoint. The prompts are versioned (:data:`PROMPT_VERSION`; the version and a
hash of each prompt text are recorded in the author phase's result, the world's provenance). The
model's answer is read with the JSON parser (the first JSON object in the text, fenced or not) and
must hold ``{"jobs": [...]}``, each job ``{id, request, reference: {calls}, goal_checks, wrong?}``.
The model's text never decides a verdict: every job goes through the same gate as derived ones
(``._gate``), and its hard rules that nothing outside its scope changed come from evidence (its own
reference, run once). An answer that is not JSON, or no answer, is one error naming the phase.

Each request asks for the answer's form (:attr:`ModelConfig.response_format`): by default OpenAI's structured
output, ``{"type": "json_schema", "json_schema": {"name": "jobs", "schema": JOBS_SCHEMA}}``, which OpenAI's API,
vLLM, SGLang, llama.cpp's server and ``rehearsal models serve`` honour by constraining the answer to
:data:`JOBS_SCHEMA`, so that a small model that would answer prose answers jobs the gate can read; ``json_object``
(any JSON object) for an endpoint with JSON mode alone; ``none`` for one with neither.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import CompileError

PROMPT_VERSION = "compile-author/1"
"""The version of the author and repair prompts."""
MAX_ANSWER_CHARS = 200_000
"""The longest answer read."""
MAX_JOBS = 100
"""Jobs one answer may propose."""
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
"""The values of :attr:`ModelConfig.response_format`."""
_SCALAR = {"type": ["string", "number", "integer", "boolean", "null"], "maxLength": 200}
_NAME = {"type": "string", "maxLength": 120}
_CALLS = {"type": "array", "maxItems": 6, "items": {
    "type": "object", "required": ["tool", "args"],
    "properties": {"tool": {"type": "string", "maxLength": 64},
                   "args": {"type": "object", "additionalProperties": _SCALAR}}}}
_CHECK = {
    "type": "object", "required": ["name", "sql", "params", "op", "want"],
    "properties": {"name": _NAME, "sql": {"type": "string", "maxLength": 500},
                   "params": {"type": "array", "maxItems": 6, "items": _SCALAR},
                   "op": {"enum": ["eq", "ne", "gt", "ge", "lt", "le"]}, "want": _SCALAR}}
_JOB = {
    "type": "object", "required": ["id", "request", "reference", "goal_checks"],
    "properties": {"id": {"type": "string", "maxLength": 64}, "request": {"type": "string", "maxLength": 400},
                   "reference": {"type": "object", "required": ["calls"], "properties": {"calls": _CALLS}},
                   "goal_checks": {"type": "array", "maxItems": 4, "items": _CHECK},
                   "wrong": {"type": "array", "maxItems": 3, "items": {
                       "type": "object", "required": ["name", "calls"],
                       "properties": {"name": _NAME, "calls": _CALLS}}}}}
JOBS_SCHEMA: dict[str, Any] = {"type": "object", "required": ["jobs"],
                               "properties": {"jobs": {"type": "array", "maxItems": 20, "items": _JOB}}}
"""The schema of an answer (what the author prompt describes), sent with ``response_format`` ``json_schema``: every
list and text bounded, so that an endpoint that constrains its answer to it closes the object within ``max_tokens``
(at most 20 jobs an answer; a tool's arguments are flat values)."""

AUTHOR_PROMPT = """You write jobs for a practice world of the application described below. A job is a request a
customer makes in their own words, the tool calls that do it (the reference), and goal checks: read-only SQL
SELECT statements returning one value, each with op (eq ne gt ge lt le) and want, that hold only once the job is
done. Use only the tools and tables given. Answer with one JSON object and nothing else:
{"jobs": [{"id": "lowercase-with-dashes", "request": "...", "reference": {"calls": [{"tool": "...", "args": {}}]},
"goal_checks": [{"name": "...", "sql": "SELECT ... WHERE x = ?", "params": [...], "op": "eq", "want": 1}],
"wrong": [{"name": "wrong:...", "calls": [...]}]}]}"""

REPAIR_PROMPT = """These jobs were refused by the gate, each with the reason. Answer the corrected jobs (same ids) as
one JSON object {"jobs": [...]}; leave out a job you cannot make fair."""


@dataclass(frozen=True)
class ModelConfig:
    """Where the compiler's model is."""

    model: str
    """The model's name at the endpoint."""
    base_url: str | None = None
    """The endpoint (None: the SDK's default)."""
    api_key: str = "none"
    """The key sent (a local endpoint takes any)."""
    seed: int = 0
    """The sampling seed sent (with temperature 0)."""
    timeout_s: float = 300.0
    """Seconds one request may take."""
    max_tokens: int = 4096
    """The longest answer asked for."""
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    """What each request asks of the answer's form: ``json_schema`` (the endpoint constrains the answer to
    :data:`JOBS_SCHEMA`), ``json_object`` (to any JSON object), or ``none`` (the answer is still read as JSON)."""

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"expected response_format among {RESPONSE_FORMATS}; got {self.response_format!r}")


def prompt_hashes() -> dict[str, str]:
    """SHA-256 of each prompt text, for the provenance."""
    return {name: hashlib.sha256(text.encode()).hexdigest()
            for name, text in (("author", AUTHOR_PROMPT), ("repair", REPAIR_PROMPT))}


def read_jobs(text: str | None) -> list[dict[str, Any]]:
    """The jobs of one answer, read with the JSON parser.

    Raises:
        CompileError: the answer is empty, too long, holds no JSON object, or no ``jobs`` list.
    """
    if not text or not text.strip():
        raise CompileError("author", "expected the model to answer a JSON object of jobs; it answered nothing. Fix: "
                           "check the model and endpoint, or compile without --model")
    if len(text) > MAX_ANSWER_CHARS:
        raise CompileError("author", f"expected an answer of at most {MAX_ANSWER_CHARS:,} characters; got "
                           f"{len(text):,}")
    decoder = json.JSONDecoder(strict=False)  # control characters inside strings read too (a grammar allows them)
    start = text.find("{")
    while start != -1:
        try:
            found, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(found, dict) and isinstance(found.get("jobs"), list):
            jobs = [j for j in found["jobs"] if isinstance(j, dict)][:MAX_JOBS]
            return [{**j, "origin": "model"} for j in jobs]
        start = text.find("{", start + 1)
    raise CompileError("author", f"expected the model to answer a JSON object {{\"jobs\": [...]}}; it answered "
                       f"{text.strip()[:80]!r}. Fix: use a model that follows the prompt, or compile without --model")


FORMS: dict[str, Any] = {"json_schema": {"type": "json_schema", "json_schema": {"name": "jobs", "schema": JOBS_SCHEMA}},
                         "json_object": {"type": "json_object"}, "none": None}
"""Each :attr:`ModelConfig.response_format` as the request's ``response_format`` (None: not sent)."""


class CompilerModel:
    """The compiler's model over the OpenAI protocol (see the module docstring)."""

    def __init__(self, config: ModelConfig) -> None:
        import openai

        self.config = config
        self.client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key, timeout=config.timeout_s,
                                    max_retries=1)
        self.calls = 0

    def _jobs(self, system: str, user: str) -> list[dict[str, Any]]:
        import openai

        self.calls += 1
        form = FORMS[self.config.response_format]
        try:
            answer = self.client.chat.completions.create(
                model=self.config.model, temperature=0, seed=self.config.seed, max_tokens=self.config.max_tokens,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                response_format=openai.omit if form is None else form)
        except openai.OpenAIError as exc:
            raise CompileError("author", f"expected the model {self.config.model!r} to answer; the request failed "
                               f"({type(exc).__name__}: {str(exc)[:160]}). Fix: check --base-url and the model "
                               "name") from None
        choice = answer.choices[0] if answer.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        try:
            return read_jobs(text)
        except CompileError:
            if choice is None or choice.finish_reason != "length":
                raise
        raise CompileError("author", f"expected the model's JSON object of jobs to end within max_tokens "
                           f"({self.config.max_tokens}); the answer was cut off there ({text.strip()[:80]!r}...). "
                           "Fix: raise --max-tokens, or use a model that answers in fewer tokens")

    def propose(self, world: Mapping[str, Any], examples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The model's jobs for ``world`` (tools, tables, role), given evidence jobs as examples."""
        user = json.dumps({"world": world, "examples": [
            {k: e[k] for k in ("id", "request", "reference", "goal_checks")} for e in examples[:3]]},
            sort_keys=True)
        return self._jobs(AUTHOR_PROMPT, user)

    def repair(self, failing: Sequence[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
        """The model's corrected jobs for ``failing`` (job, reason)."""
        user = json.dumps({"refused": [{"job": {k: v for k, v in job.items() if k not in ("evidence", "origin")},
                                        "reason": reason} for job, reason in failing]}, sort_keys=True, default=str)
        return self._jobs(REPAIR_PROMPT, user)
