"""Holdout is an identity, not a label: a scenario any published version placed in holdout stays holdout.

Two published versions of one world may place the same scenario in different splits, and a world rebuilt from the
same folder (or imported again under another name) publishes the same scenarios again. A split label alone would
let the improvement step read, through version 2's dev, a scenario that is holdout in version 1, and readiness
would then count it as "never learned from". So a scenario is recognised by what it *is* as well as by its id:

* its id within its world (``world/scenario``);
* its request, what its customer answers when asked and how the request changes, normalised (case, punctuation and
  spacing ignored), with its faults: the situation the agent meets;
* its checks: the goal checks' SQL, operator, parameters and wanted value, and the answer SQL (never their names,
  which are prose);
* its reference: the reference solution's world-tool calls and arguments (never its closing message).

Each part is a SHA-256 fingerprint. A scenario matches a holdout scenario when its id, or **any two** of its three
content parts, are the same as that holdout scenario's in any published version of any world under the versions
root: a copy under another id, a reworded request over the same checks and reference, and a rebuilt world all match,
while scenarios that merely share one part (one question asked of different customers; the same kind of check on
the same table) do not. A part that says nothing of the scenario (no goal check, no world-tool call, an empty
request) is not compared. :func:`holdout_index` reads every
published version once per change of the versions root; the improvement step refuses a run with such a scenario
(:mod:`._reader`), and readiness never counts as "never learned from" a scenario whose identity an improvement read.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..versions import NotPublished, load_content
from ..versions._store import versions_root

CLOSING_TOOLS = frozenset({"finish", "give_up", "send_message", "ask_customer"})
"""Calls whose arguments are prose, left out of the reference fingerprint."""
CONTENT = ("request", "checks", "reference")
"""The content parts of an identity."""
PAIRS = tuple((a, b) for i, a in enumerate(CONTENT) for b in CONTENT[i + 1:])
"""Two content parts that together say which scenario it is."""
PARTS = ("id", *(f"{a}+{b}" for a, b in PAIRS))
"""What a match may rest on, in the order a match names it."""


@dataclass(frozen=True)
class Identity:
    """What a scenario is, whatever id or split a version gives it."""

    world: str
    """The world's name in the version that published it."""
    version: str
    """The world version id."""
    scenario: str
    """The scenario id in that version."""
    split: str
    """The split that version gives it."""
    prints: Mapping[str, str]
    """``id``, or two content parts (``request+checks``, ``request+reference``, ``checks+reference``) ->
    fingerprint; a pair with a part that says nothing is absent."""

    def where(self) -> str:
        return f"{self.world} {self.version} {self.scenario} ({self.split})"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def identity(world: str, version: str, scenario: Mapping[str, Any]) -> Identity:
    """The identity of a scenario as published content holds it (``content["scenarios"][i]``)."""
    prints = {"id": _digest(["id", world, scenario.get("id")])}
    request = _words(str(scenario.get("request") or ""))
    if request:  # with what the customer answers when asked: one question asked by two customers is two scenarios
        facts = sorted(_words(" ".join(map(str, f))) for f in scenario.get("facts") or ())
        change = _words(json.dumps(scenario.get("change"), sort_keys=True)) if scenario.get("change") else ""
        faults = sorted(json.dumps(f, sort_keys=True) for f in scenario.get("faults") or ())
        prints["request"] = _digest(["request", request, facts, change, faults])
    checks = sorted(_digest([" ".join(str(c.get("sql", "")).split()), c.get("op"), c.get("params"), c.get("want")])
                    for c in scenario.get("goal_checks") or ())
    answer = " ".join(str(scenario.get("answer_sql") or "").split())
    if checks or answer:
        prints["checks"] = _digest(["checks", checks, answer])
    reference = scenario.get("reference") or {}
    calls = [[c.get("tool"), c.get("args")] for c in reference.get("calls") or () if c.get("tool") not in CLOSING_TOOLS]
    if calls:
        prints["reference"] = _digest(["reference", calls])
    for a, b in PAIRS:
        if a in prints and b in prints:
            prints[f"{a}+{b}"] = _digest([prints[a], prints[b]])
    for part in CONTENT:
        prints.pop(part, None)
    return Identity(world=world, version=version, scenario=str(scenario.get("id")), split=str(scenario.get("split")),
                    prints=prints)


@dataclass(frozen=True)
class HoldoutIndex:
    """Every holdout scenario of every published version under one versions root, by each part of its identity."""

    root: str
    """The versions root read."""
    by_print: Mapping[str, Identity]
    """Fingerprint -> a holdout scenario that has it."""

    def match(self, ident: Identity) -> tuple[Identity, str] | None:
        """(the holdout scenario ``ident`` is, the first part that matched), or None."""
        for part in PARTS:
            found = self.by_print.get(ident.prints.get(part, ""))
            if found is not None:
                return found, part
        return None


def published_versions(root: str | Path | None = None) -> list[tuple[str, str]]:
    """(world, version id) of every version published under the versions root."""
    base = versions_root(root)
    if not base.is_dir():
        return []
    return sorted((w.name, v.name) for w in base.iterdir() if w.is_dir() for v in w.iterdir() if v.is_dir())


_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Identity, ...]] = {}


def every_identity(root: str | Path | None = None) -> tuple[Identity, ...]:
    """The identity of every scenario of every version published under ``root`` (read once per set of versions)."""
    versions = tuple(published_versions(root))
    key = (str(versions_root(root)), versions)
    if key not in _CACHE:
        _CACHE[key] = tuple(_identities(versions, root))
    return _CACHE[key]


def holdout_index(root: str | Path | None = None) -> HoldoutIndex:
    """The index of every holdout scenario published under ``root`` (default: the state home's world versions)."""
    by_print: dict[str, Identity] = {}
    for ident in every_identity(root):
        if ident.split == "holdout":
            for fingerprint in ident.prints.values():
                by_print.setdefault(fingerprint, ident)
    return HoldoutIndex(root=str(versions_root(root)), by_print=by_print)


def learned_prints(scenarios: Iterable[str], root: str | Path | None = None) -> frozenset[str]:
    """The fingerprints of every published scenario (any world, any version) whose id is in ``scenarios``: what an
    improvement that read those scenarios has seen, whatever id or split another version gives it."""
    ids = set(scenarios)
    return frozenset(f for ident in every_identity(root) if ident.scenario in ids for f in ident.prints.values())


def _identities(versions: Iterable[tuple[str, str]], root: str | Path | None) -> Iterable[Identity]:
    for world, version in versions:
        try:
            content = load_content(world, version, root)
        except (NotPublished, ValueError, OSError):
            continue  # half-written or edited: it publishes nothing
        for scenario in content.get("scenarios") or ():
            yield identity(world, version, scenario)


def scenario_identities(world: str, version: str, root: str | Path | None = None) -> list[Identity]:
    """The identities of every scenario of one published version (NotPublished when it is not)."""
    return [identity(world, version, s) for s in load_content(world, version, root).get("scenarios") or ()]


def held_out(world: str, version: str, root: str | Path | None = None) -> dict[str, str]:
    """Scenario id of ``world`` ``version`` -> why it is holdout (in this or another published version, by id or by
    content), for each scenario of that version that is."""
    index = holdout_index(root)
    out = {}
    for ident in scenario_identities(world, version, root):
        found = index.match(ident)
        if found is not None:
            other, part = found
            same = other.world == world and other.version == version and other.scenario == ident.scenario
            out[ident.scenario] = ("holdout in this version" if same else
                                   f"holdout as {other.where()}, the same {part.replace('+', ' and ')}")
    return out
