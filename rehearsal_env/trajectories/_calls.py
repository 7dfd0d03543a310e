"""An episode's model calls with the engine's tokens: what the gateway kept, or what an in-process policy hands in.

A :class:`ModelCall` is one model call as the engine saw it: its prompt's token ids, the completion's token ids
and each completion token's logprob, and the turn whose step the call's reply led to. :func:`gateway_calls`
reads them from the calls the gateway kept beside an episode's records (``RUN_DIR/gateway/<episode id>.jsonl``;
vLLM's ``prompt_token_ids`` and ``token_ids`` where the provider returned them, the chat form's logprobs); an
in-process policy that holds its own token ids builds the same objects and hands them to
:func:`~rehearsal_env.trajectories.to_trajectory` and :func:`~rehearsal_env.trajectories.check_boundaries`.

The kept lines are the provider's answers, so every field is checked as it is read: a token id is an integer in
``[0, 2**32)``, a logprob a finite number ``<= 0``; a value that is not is left out (``None``) with the reason in
``note``, never guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..gateway import OK, read_kept
from ..records import EpisodeRecord

MAX_TOKEN_ID = 2**32
"""Token ids are read as integers in ``[0, MAX_TOKEN_ID)``."""


@dataclass(frozen=True)
class ModelCall:
    """One model call of an episode, with the engine's tokens where they were recorded."""

    index: int
    """0-based position among the episode's model calls, in the order they were made."""
    turn: int | None
    """The turn (``record.trace[].turn``) whose step reported this call, i.e. the tool call its reply led to;
    None when not known (a reply after the last step, or a run kept before turns were)."""
    prompt_token_ids: tuple[int, ...] | None
    """The token ids of the whole prompt the engine read (None: not recorded)."""
    completion_token_ids: tuple[int, ...] | None
    """The token ids the engine generated (None: not recorded)."""
    logprobs: tuple[float, ...] | None = None
    """Each generated token's log probability, aligned with ``completion_token_ids`` (None: not recorded)."""
    prompt_tokens: int | None = None
    """The provider's ``usage.prompt_tokens`` (None: not given)."""
    completion_tokens: int | None = None
    """The provider's ``usage.completion_tokens`` (None: not given)."""
    status: str = OK
    """The gateway's status of the call: ``ok``, ``refused``, ``provider_failed`` or ``harness_closed``."""
    note: str | None = None
    """Why recorded token ids or logprobs were left out (None: nothing was)."""


def _id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_TOKEN_ID


def _ids(parts: Any, *, whole: bool) -> tuple[tuple[int, ...] | None, str | None]:
    """Token ids from a ledger line's parts (one per answer body or stream chunk): a completion's are the parts
    joined (a stream sends them a chunk at a time), a prompt's the one part sent (``whole``)."""
    if parts is None:
        return None, None
    sent = [p for p in parts if p is not None] if isinstance(parts, list) else [parts]
    if not sent:
        return None, None
    if not all(isinstance(p, list) and all(map(_id, p)) for p in sent):
        return None, f"token ids that are not lists of integers in [0, {MAX_TOKEN_ID})"
    if whole and any(p != sent[0] for p in sent):
        return None, "the provider sent different prompt token ids in one answer"
    out: list[int] = list(sent[0]) if whole else [t for p in sent for t in p]
    return tuple(out), None


def _logprobs(parts: Any) -> tuple[tuple[float, ...] | None, str | None]:
    """Each generated token's logprob from a line's logprobs parts (the chat form, ``content[].logprob``; the
    completion form, ``token_logprobs``)."""
    if not isinstance(parts, list) or not parts:
        return None, None
    out: list[float] = []
    for part in parts:
        entries = part.get("content") if isinstance(part, dict) and "content" in part else \
            part.get("token_logprobs") if isinstance(part, dict) else None
        if not isinstance(entries, list):
            return None, "logprobs in neither the chat form (content) nor the completion form (token_logprobs)"
        for entry in entries:
            value = entry.get("logprob") if isinstance(entry, dict) else entry
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value > 0:
                return None, f"a logprob that is not a finite number <= 0 ({str(value)[:40]})"
            out.append(float(value))
    return tuple(out), None


def _count(usage: Any, name: str) -> int | None:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if _id(value) else None


def call_from_line(index: int, turn: int | None, line: dict[str, Any]) -> ModelCall:
    """The :class:`ModelCall` of one gateway ledger line (see :class:`rehearsal_env.gateway.Call`)."""
    raw = line.get("token_ids")
    token_ids: dict[str, Any] = raw if isinstance(raw, dict) else {}
    prompt, why_prompt = _ids(token_ids.get("prompt_token_ids"), whole=True)
    completion, why_completion = _ids(token_ids.get("token_ids"), whole=False)
    logprobs, why_logprobs = _logprobs(line.get("logprobs"))
    notes = [why for why in (why_prompt, why_completion, why_logprobs) if why]
    finishes = line.get("finish_reasons")
    if isinstance(finishes, list) and len(finishes) > 1 and (completion is not None or logprobs is not None):
        completion, logprobs = None, None  # n > 1: the choices' tokens arrive interleaved, whose is whose unknown
        notes.append(f"{len(finishes)} choices in one answer (n > 1): whose tokens are whose is not recorded")
    given = line.get("status")
    status = given if isinstance(given, str) else "unknown"
    return ModelCall(index=index, turn=turn, prompt_token_ids=prompt, completion_token_ids=completion,
                     logprobs=logprobs, prompt_tokens=_count(line.get("usage"), "prompt_tokens"),
                     completion_tokens=_count(line.get("usage"), "completion_tokens"), status=status[:40],
                     note="; ".join(notes) or None)


def _turns(calls_per_turn: tuple[int, ...] | None, turns: list[int], calls: int) -> list[int | None]:
    """The turn of each call from how many calls each step reported (None for each when that is not known or
    does not fit the calls kept)."""
    if calls_per_turn is None or len(calls_per_turn) != len(turns) or sum(calls_per_turn) != calls:
        return [None] * calls
    out: list[int | None] = []
    for turn, count in zip(turns, calls_per_turn, strict=True):
        out += [turn] * count
    return out


def gateway_calls(run_dir: str | Path, record: EpisodeRecord) -> tuple[ModelCall, ...]:
    """The model calls the gateway kept for ``record``'s episode in ``run_dir`` (empty: none were kept, the
    episode was not played through ``rehearsal gateway``).

    Raises:
        ValueError: the kept calls file is larger than :data:`rehearsal_env.gateway.MAX_KEPT_BYTES`.
    """
    kept = read_kept(run_dir, record.episode_id)
    if kept is None:
        return ()
    turns = _turns(kept.calls_per_turn, [t.turn for t in record.trace], len(kept.lines))
    return tuple(call_from_line(i, turn, line) for i, (turn, line) in enumerate(zip(turns, kept.lines, strict=True)))
