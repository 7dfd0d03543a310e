"""Provenance: the fields that decide whether two numbers can be compared.

A reward is only comparable with another from the same world under the same
contract. :data:`FIELDS` lists, in dotted form, what must match;
:func:`differing_fields` says which of them differ between two provenance blobs.
"""

from __future__ import annotations

from collections.abc import Mapping
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
"""Fields two runs must share to be compared (``build.*`` is reported but not required)."""


def lookup(blob: Mapping[str, Any], dotted: str) -> Any:
    """``blob["a"]["b"]`` for ``"a.b"``; None when absent."""
    value: Any = blob
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def differing_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The names in :data:`FIELDS` whose values differ between ``a`` and ``b`` (empty: comparable)."""
    return [f for f in FIELDS if lookup(a, f) != lookup(b, f)]
