"""Whether two numbers can be compared: the provenance fields that must match.

A reward is only comparable with another from the same world under the same
contract. :data:`FIELDS` lists, in dotted form, what must match;
:func:`differing_fields` says which of them differ between two provenance
blobs, and :func:`comparable` adds what differs but does not decide (the build).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FIELDS: tuple[str, ...] = (
    "reward_version",
    "reward_profile",
    "world_version",
    "dataset.catalog_hash",
    "dataset.data_anchor",
    "dataset.seed_manifest_hash",
    "suite.version",
    "capabilities.suite_fingerprint",
    "capabilities.catalog_match",
    "capabilities.freeze_time_source",
)
"""Fields two runs must share to be compared."""

REPORTED: tuple[str, ...] = ("build.version", "build.binary_sha256")
"""Fields reported when they differ, without making two runs incomparable: a rebuild of the same
package that changed neither the world nor the scoring contract measures the same thing."""

_NORMALIZE: dict[str, Callable[[Any], Any]] = {
    # Who pinned the clock does not change the measurement; whether anybody did does.
    "capabilities.freeze_time_source": lambda source: source is not None,
}


def lookup(blob: Mapping[str, Any], dotted: str) -> Any:
    """``blob["a"]["b"]`` for ``"a.b"``; None when absent."""
    value: Any = blob
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _key(blob: Mapping[str, Any], dotted: str) -> Any:
    value = lookup(blob, dotted)
    return _NORMALIZE[dotted](value) if dotted in _NORMALIZE else value


def differing_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The names in :data:`FIELDS` whose values differ between ``a`` and ``b`` (empty: comparable).

    ``capabilities.freeze_time_source`` counts as differing only when one clock was pinned and the
    other was not; two pins by different means (CLI, Python) to the same day are the same clock, and
    a different day shows in ``dataset.data_anchor``.
    """
    return [f for f in FIELDS if _key(a, f) != _key(b, f)]


@dataclass(frozen=True)
class Comparability:
    """The answer to "can these two numbers be compared?"."""

    comparable: bool
    """True when no field of :data:`FIELDS` differs."""
    differs: tuple[str, ...]
    """The fields of :data:`FIELDS` that differ (why the runs are not comparable)."""
    notes: tuple[str, ...]
    """Fields of :data:`REPORTED` that differ (worth knowing; not deciding)."""

    def explain(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
        """One line per differing field with both values."""
        if self.comparable and not self.notes:
            return "comparable: every provenance field matches"
        head = "comparable" if self.comparable else "not comparable"
        lines = [f"{head}:"]
        lines += [f"  {f}: {lookup(a, f)!r} vs {lookup(b, f)!r}" for f in self.differs]
        lines += [f"  (reported) {f}: {lookup(a, f)!r} vs {lookup(b, f)!r}" for f in self.notes]
        return "\n".join(lines)


def comparable(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparability:
    """Whether runs with provenance ``a`` and ``b`` can be compared, and if not, which fields differ."""
    differs = tuple(differing_fields(a, b))
    notes = tuple(f for f in REPORTED if lookup(a, f) != lookup(b, f))
    return Comparability(not differs, differs, notes)
