"""The turn-boundary check: each model call's prompt must begin with the previous call's prompt and completion,
token for token.

A trainer that learns from an episode's token ids needs each call's tokens to be the ones the engine read and
wrote. When a harness (or a chat template) turns the conversation back into text and the engine tokenizes it
again, the previous reply's tokens can come back different: a BPE merge across the boundary between the
prompt's last text and the reply's first (``"\\n" + "{"`` becoming one token), a reply re-rendered from its
parsed tool call, whitespace normalized. The text is the same, the tokens are not, and the logprobs no longer
belong to the sequence a trainer would score (re-tokenization drift).

:func:`check_boundaries` compares every consecutive pair of calls that recorded prompt and completion ids: call
``n+1``'s prompt ids must start with call ``n``'s prompt ids followed by its completion ids. It reports each
pair that does not, with the first position where the ids part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._calls import ModelCall

EXACT = "exact"
"""Every checked pair continued token for token (and at least one pair was checked)."""
DRIFT = "drift"
"""At least one pair did not."""
UNCHECKED = "unchecked"
"""No pair of consecutive calls both recorded their token ids (nothing to compare)."""
_SHOWN = 8


@dataclass(frozen=True)
class Drift:
    """A call whose prompt does not begin with the previous call's prompt and completion."""

    call: int
    """The later call's index (:attr:`ModelCall.index`)."""
    turn: int | None
    """The later call's turn (None: not known)."""
    position: int
    """The first token position where the later prompt differs from the previous prompt + completion (equal to
    the later prompt's length when it is a strict prefix of them: it stops short)."""
    expected: tuple[int, ...]
    """Up to 8 ids of the previous prompt + completion from ``position`` on."""
    found: tuple[int, ...]
    """Up to 8 ids of the later prompt from ``position`` on."""

    def describe(self) -> str:
        """One line saying where the ids part."""
        where = f"call {self.call}" + (f" (turn {self.turn})" if self.turn is not None else "")
        return (f"{where}: its prompt differs from the previous call's prompt + completion at token {self.position} "
                f"(expected {list(self.expected)}, found {list(self.found)})")


@dataclass(frozen=True)
class BoundaryReport:
    """The turn-boundary check of one episode's model calls."""

    calls: int
    """Model calls of the episode."""
    with_ids: int
    """Of those, calls that recorded both their prompt's and their completion's token ids."""
    checked: int
    """Consecutive pairs of calls compared (both recorded their ids)."""
    drifts: tuple[Drift, ...]
    """The pairs whose later prompt does not continue the earlier prompt + completion, in call order."""

    @property
    def verdict(self) -> str:
        """:data:`EXACT`, :data:`DRIFT` or :data:`UNCHECKED`."""
        return DRIFT if self.drifts else EXACT if self.checked else UNCHECKED

    def describe(self) -> str:
        """One line: the verdict and what it rests on."""
        if self.drifts:
            first = self.drifts[0].describe()
            return f"token drift at {len(self.drifts)} of {self.checked} turn boundaries; first at {first}"
        if self.checked:
            boundaries = f"{self.checked} turn boundar" + ("y continues" if self.checked == 1 else "ies continue")
            return f"token-exact: {boundaries} token for token over {self.calls} model calls"
        return (f"unchecked: {self.with_ids} of {self.calls} model calls recorded prompt and completion token ids, "
                "no two in a row")

    def to_dict(self) -> dict[str, object]:
        """The report as plain JSON values (as the ATIF export carries it)."""
        return {"verdict": self.verdict, "calls": self.calls, "with_ids": self.with_ids, "checked": self.checked,
                "drifts": [{"call": d.call, "turn": d.turn, "position": d.position, "expected": list(d.expected),
                            "found": list(d.found)} for d in self.drifts],
                "summary": self.describe()}


def _parting(before: Sequence[int], after: Sequence[int]) -> int | None:
    """The first position where ``after`` does not continue ``before`` (None: it does)."""
    for position, token in enumerate(before):
        if position >= len(after) or after[position] != token:
            return position
    return None


def check_boundaries(calls: Sequence[ModelCall]) -> BoundaryReport:
    """Check that each call's prompt ids begin with the previous call's prompt ids + completion ids.

    Calls are taken in the order given (the order they were made). A pair is compared when both calls recorded
    prompt and completion ids; a call without them breaks the chain there (the pair around it is not checked).
    """
    drifts: list[Drift] = []
    checked = with_ids = 0
    before: tuple[int, ...] | None = None  # the previous call's prompt + completion, when it recorded both
    for call in calls:
        prompt, completion = call.prompt_token_ids, call.completion_token_ids
        if prompt is None or completion is None:
            before = None
            continue
        with_ids += 1
        if before is not None:
            checked += 1
            position = _parting(before, prompt)
            if position is not None:
                drifts.append(Drift(call.index, call.turn, position, before[position:position + _SHOWN],
                                    prompt[position:position + _SHOWN]))
        before = prompt + completion
    return BoundaryReport(len(calls), with_ids, checked, tuple(drifts))
