"""Provenance: what a number was measured on, and whether two numbers can be compared.

One JSON blob (:class:`Provenance`) is returned by ``rehearsal health``, written
into every run directory as ``provenance.json`` and stamped on every episode
record. :func:`comparable` (and :func:`differing_fields`, which ``measure.py``
uses) say whether two runs can be compared and, if not, which fields differ.
"""

from ._blob import PROVENANCE_FORMAT, Build, Capabilities, Dataset, Provenance, Suite, provenance_from_dict
from ._catalog import catalog_problems
from ._compare import FIELDS, REPORTED, Comparability, comparable, differing_fields, lookup
from ._make import OUTCOME_PROFILE, OUTCOME_REWARD_VERSION, binary_sha256, provenance_of, reward_contract

__all__ = [
    "FIELDS",
    "OUTCOME_PROFILE",
    "OUTCOME_REWARD_VERSION",
    "PROVENANCE_FORMAT",
    "REPORTED",
    "Build",
    "Capabilities",
    "Comparability",
    "Dataset",
    "Provenance",
    "Suite",
    "binary_sha256",
    "catalog_problems",
    "comparable",
    "differing_fields",
    "lookup",
    "provenance_from_dict",
    "provenance_of",
    "reward_contract",
]
