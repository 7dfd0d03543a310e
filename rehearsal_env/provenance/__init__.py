"""Provenance: the fields that decide whether two numbers can be compared."""

from ._compare import FIELDS, differing_fields, lookup

__all__ = ["FIELDS", "differing_fields", "lookup"]
