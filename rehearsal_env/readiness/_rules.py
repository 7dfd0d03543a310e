"""Readiness: "Ready to pilot" or "Needs work" for one agent version on one world version.

An agent version is ready to pilot on a world version when all of these hold:

1. the world version is published (only a published version can be evaluated);
2. it has at least :data:`MIN_SCORED` scored root episodes on scenarios it never
   learned from: every scenario for a version nobody improved, the holdout
   scenarios for a version produced by an improvement step;
3. :data:`MIN_VERIFIED_SHARE` or more of those episodes are verified;
4. no episode broke a hard rule;
5. no episode claimed to be done when it was not (a false completion);
6. no more than :data:`MAX_NOT_SCORED_SHARE` (5%, configurable) of the episodes
   rule 2 would count were not scored: an instrument that failed that often
   has not measured the agent, so a not-scored episode is left out of the
   rates but is never invisible (the verdict lists the causes).

Not-scored episodes cannot turn the verdict (:mod:`._extremes`): rules 2-5 are applied with every
not-scored root episode on a scenario in use counted as the worst outcome for the agent and as the
best. "Ready to pilot" needs both extremes ready, "Needs work" needs neither ready (its reasons are
those that hold either way), and otherwise the verdict is "Not decided: N episodes not scored
(causes)", with the verified share at both extremes: a model endpoint that fails exactly the
episodes its agent is losing gains nothing. The counts and the verified share keep their meaning
(scored episodes only); the bounds are printed beside them.

Only root episodes are evidence: an episode that began at ``reset``. A fork or a restore
(``parent_kind`` on its record; :func:`rehearsal_env.records._record.episode_kind` decides) is a
training and search tool whose steps after the cut may be anyone's, so it counts for no rule, the
hard rules and false completions included, and the verdict lists how many were left out
(``fork (not evidence)``, ``restore (not evidence)``). A key that forks its passing episodes just
before ``finish`` and finishes the forks adds nothing to its verified share.

Readiness is per key. Episodes played over ``rehearsal serve`` carry the id of the API key that
played them (``key_id``); one verdict counts one key's episodes and names it, and another key's
episodes never change it: anyone can type an agent's name, so an agent name is scoped by the key
that played it (unless keys are bound to it with ``rehearsal keys create --agent``, so that only
those keys can play as it). Other keys that played the same agent version are listed with the
verdict, as information only. Episodes not played over ``serve`` (no key) are a verdict of their own.

Episodes on scenarios kept out of, or withdrawn from, the version do not
count for anything. Not-scored episodes (the environment failed) are not
counted against the agent, but too many of them fail rule 6. A record's cause
is ``not_scored_cause`` (world, database, provider, sandbox, worker), or
``unknown`` for records written before causes were recorded. Rules 4 and 5 look at every counted episode of the
agent version, the ones it learned from included: a broken hard rule is never
acceptable in a pilot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..improve import is_improved, learned_prints, lineage_of, scenario_identities
from ..records import EpisodeRecord
from ..records._attempts import OPEN, record_field, settle
from ..records._record import ROOT_EPISODE, episode_kind
from ..versions import NotPublished, load_manifest
from ._extremes import MIN_SCORED, MIN_VERIFIED_SHARE, Episode, extreme, rule_reasons, verified_share

__all__ = ["MIN_SCORED", "MIN_VERIFIED_SHARE"]
MAX_NOT_SCORED_SHARE = 0.05
"""Largest share of the episodes rule 2 would count (scored or not) that may be not scored."""
UNKNOWN_CAUSE = "unknown"
"""The cause of a not-scored record that names none."""
READY, NEEDS_WORK, NOT_DECIDED = "Ready to pilot", "Needs work", "Not decided"


@dataclass(frozen=True)
class Readiness:
    """The readiness verdict of one agent version on one world version."""

    agent: str
    """The agent's name."""
    agent_version: str
    """The agent's version."""
    world: str
    """The world's name."""
    world_version: str
    """The world version id (``wv_...``)."""
    improved: bool
    """Whether the agent version came from an improvement step (then only holdout counts for rules 2-3)."""
    ready: bool
    """Whether every rule holds."""
    counted: int
    """Scored episodes on scenarios the version never learned from (rule 2)."""
    verified: int
    """How many of those were verified (rule 3)."""
    rule_violations: tuple[str, ...]
    """``scenario#repeat`` of every counted episode that broke a hard rule (rule 4)."""
    false_completions: tuple[str, ...]
    """``scenario#repeat`` of every counted episode with a false completion (rule 5)."""
    left_out: tuple[tuple[str, int], ...]
    """(why, how many episodes) not counted: withdrawn, kept out, learned from, not scored, and forks and
    restores (``fork (not evidence)``, ``restore (not evidence)``: only root episodes are evidence)."""
    reasons: tuple[str, ...]
    """Why it needs work, one line per failed rule (empty when ready)."""
    not_scored: int = 0
    """Not-scored episodes among those rule 2 would count (rule 6)."""
    not_scored_causes: tuple[tuple[str, int], ...] = ()
    """(cause, episodes) of those, most frequent first."""
    max_not_scored_share: float = MAX_NOT_SCORED_SHARE
    """The rule-6 limit this verdict used."""
    key_id: str | None = None
    """The API key whose episodes were counted (``rehearsal serve``); null: episodes not played over it."""
    other_keys: tuple[str, ...] = ()
    """Other keys that played episodes of the same agent version: information only, each has its own verdict and
    none changes this one."""
    decided: bool = True
    """False when the not-scored episodes, counted as the worst and as the best outcome for the agent, give
    different verdicts ("Not decided"; ``ready`` is then False)."""
    bounds: tuple[float | None, float | None] | None = None
    """The verified share of the episodes rule 2 would count with every not-scored one a failure, and a success;
    None when none was not scored."""

    @property
    def label(self) -> str:
        """``Ready to pilot``, ``Needs work`` or ``Not decided``."""
        return READY if self.ready else NEEDS_WORK if self.decided else NOT_DECIDED

    @property
    def verified_share(self) -> float | None:
        return self.verified / self.counted if self.counted else None

    @property
    def not_scored_share(self) -> float | None:
        """Not-scored share of the episodes rule 2 would count (scored or not); None when there are none."""
        total = self.counted + self.not_scored
        return self.not_scored / total if total else None


def _tag(r: EpisodeRecord) -> str:
    return f"{r.scenario}#{r.repeat}"


def _key(r: EpisodeRecord) -> str | None:
    return getattr(r, "key_id", None)


def _key_name(key: str | None) -> str:
    return key if key is not None else "(none: not served)"


def _cause(r: EpisodeRecord) -> str:
    return str(getattr(r, "not_scored_cause", None) or UNKNOWN_CAUSE)


def readiness_of(records: Sequence[EpisodeRecord], *, improved: bool = False,
          versions_root: str | Path | None = None,
          max_not_scored_share: float = MAX_NOT_SCORED_SHARE, other_keys: Sequence[str | None] = (),
          learned_from: Sequence[str] = ()) -> Readiness:
    """The readiness of the one agent version, world version and API key that ``records`` all share.

    ``max_not_scored_share`` is rule 6's limit (a share in [0, 1]); ``other_keys`` are other keys that
    played episodes of the same agent version, listed with the verdict as information only (another key's
    episodes never change a verdict). ``learned_from``: the scenario ids the version's improvement read (its
    lineage); a holdout scenario that is one of them by identity (:mod:`rehearsal_env.improve._holdout`: the same
    id, or the same content under another id, split, version or world) is never counted as "never learned from".
    Forks and restores are left out of every rule and counted in ``left_out``.

    Raises:
        ValueError: the records are empty or mix agents, agent versions, world versions or keys.
    """
    if not records:
        raise ValueError("readiness needs episode records; got none (run `rehearsal run` first)")
    keys = {(r.agent, r.agent_version, r.world, r.world_version) for r in records}
    players = {_key(r) for r in records}
    if len(players) > 1:
        raise ValueError(f"readiness counts one API key's episodes; these records were played by keys "
                         f"{', '.join(sorted(map(_key_name, players)))}: use assess() to split them")
    if not 0 <= max_not_scored_share <= 1:
        raise ValueError(f"max_not_scored_share is a share of episodes in [0, 1]; got {max_not_scored_share}")
    if len(keys) > 1:
        raise ValueError(f"readiness is per agent version and world version; these records mix "
                         f"{sorted(keys)}: use assess() to split them")
    agent, agent_version, world, world_version = keys.pop()
    reasons: list[str] = []
    try:
        not_in_use = load_manifest(world, world_version, root=versions_root).not_in_use()
    except NotPublished as exc:
        not_in_use = {}
        reasons.append(f"the world version is not published, so it cannot be evaluated: {exc}")
    left: dict[str, int] = {}
    settled = settle([r for r in records if episode_kind(r.parent_episode, r.parent_kind) == ROOT_EPISODE],
                     record_field)
    status = {id(e.record): e.status for e in settled}
    superseded = sum(len(e.superseded) for e in settled)
    if superseded:  # a retried episode counts once: its first scored attempt (else its last)
        left["other attempts of retried episodes"] = superseded
    records = [r for r in records if id(r) in status or episode_kind(r.parent_episode, r.parent_kind) != ROOT_EPISODE]
    in_use: list[EpisodeRecord] = []
    pending: list[EpisodeRecord] = []
    causes: dict[str, int] = {}
    for r in records:
        kind = episode_kind(r.parent_episode, r.parent_kind)
        why = not_in_use.get(r.scenario)
        if kind != ROOT_EPISODE:
            key = f"{kind} (not evidence)"
            left[key] = left.get(key, 0) + 1
        elif why is not None:
            key = "withdrawn scenario" if why.startswith("withdrawn") else "kept-out scenario"
            left[key] = left.get(key, 0) + 1
        elif r.outcome == "not_scored":
            left["not scored"] = left.get("not scored", 0) + 1
            pending.append(r)
            if not improved or r.split == "holdout":
                causes[_cause(r)] = causes.get(_cause(r), 0) + 1
        else:
            in_use.append(r)
    seen = _seen(learned_from, world, world_version, versions_root) if improved else frozenset()
    if seen:
        same = [r for r in [*in_use, *pending] if r.split == "holdout" and r.scenario in seen]
        if same:
            left["learned from (the same scenario as one its improvement read)"] = len(same)
        in_use = [r for r in in_use if r.scenario not in seen or r.split != "holdout"]
        pending = [r for r in pending if r.scenario not in seen or r.split != "holdout"]
        causes = dict(_all_causes([r for r in pending if r.split == "holdout"]))
    never_learned = [r for r in in_use if not improved or r.split == "holdout"]
    if improved and len(never_learned) < len(in_use):
        left["learned from (not holdout)"] = len(in_use) - len(never_learned)
    verified = sum(r.outcome == "verified" for r in never_learned)
    scope = "holdout scenarios" if improved else "scenarios"
    scored = [_episode(r, improved, status.get(id(r)) == OPEN) for r in in_use]
    opened = [e for e in scored if e.open]
    both = [*scored, *(_episode(r, improved) for r in pending)]
    worst, best = extreme(both, worst=True), extreme(both, worst=False)
    at_worst, at_best = rule_reasons(worst, scope, improved), rule_reasons(best, scope, improved)
    bounded = bool(pending or opened)
    decided = not bounded or bool(at_worst) == bool(at_best) or bool(reasons)
    not_scored = sum(causes.values())
    ordered = tuple(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])))
    if not bounded:
        reasons += rule_reasons(scored, scope, improved)
    elif at_best:
        reasons += at_best  # they hold whatever the not-scored episodes were
    elif at_worst and not reasons:
        retried = f"; {len(opened)} more scored only by a retry that did not replay its attempt" if opened else ""
        reasons.append(f"not decided: {len(pending)} episode(s) not scored ({_causes(_all_causes(pending))}{retried}): "
                       f"counted as the worst outcome for the agent it needs work ({'; '.join(at_worst)}), as "
                       "the best it is ready; rerun those episodes (fix the failing part first)")
    would_count = len(never_learned) + not_scored
    if not_scored and not_scored / would_count > max_not_scored_share:
        reasons.append(f"{not_scored / would_count:.1%} of the episodes it would count were not scored "
                       f"({not_scored} of {would_count}; causes: {_causes(ordered)}); at most "
                       f"{max_not_scored_share:.0%} may be: fix the failing part and rerun those episodes")
    violations = tuple(_tag(r) for r in in_use if r.outcome == "rule_violated")
    false = tuple(_tag(r) for r in in_use if r.false_completion)
    player = players.pop()
    others = tuple(sorted(_key_name(k) for k in set(other_keys) - {player}))
    return Readiness(agent=agent, agent_version=agent_version, world=world, world_version=world_version,
                     improved=improved, ready=decided and not reasons, counted=len(never_learned), verified=verified,
                     rule_violations=violations, false_completions=false,
                     left_out=tuple(sorted(left.items())), reasons=tuple(reasons), not_scored=not_scored,
                     not_scored_causes=ordered, max_not_scored_share=max_not_scored_share, key_id=player,
                     other_keys=others, decided=decided,
                     bounds=(verified_share(worst), verified_share(best)) if bounded else None)


def _seen(learned_from: Sequence[str], world: str, version: str, root: str | Path | None) -> frozenset[str]:
    """The scenarios of ``world`` ``version`` that are, by identity, one of the scenarios an improvement read."""
    if not learned_from:
        return frozenset()
    prints = learned_prints(learned_from, root)
    try:
        idents = scenario_identities(world, version, root)
    except (NotPublished, ValueError, OSError):
        return frozenset(learned_from)
    return frozenset(i.scenario for i in idents if prints & set(i.prints.values())) | frozenset(learned_from)


def _episode(r: EpisodeRecord, improved: bool, opened: bool = False) -> Episode:
    return Episode(tag=_tag(r), outcome=r.outcome, false_completion=bool(r.false_completion),
                   world_tool_calls=r.world_tool_calls, counted=not improved or r.split == "holdout", open=opened)


def _all_causes(records: Sequence[EpisodeRecord]) -> tuple[tuple[str, int], ...]:
    causes: dict[str, int] = {}
    for r in records:
        causes[_cause(r)] = causes.get(_cause(r), 0) + 1
    return tuple(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])))


def _causes(causes: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{c} {k}" for c, k in causes)


def assess(records: Iterable[EpisodeRecord], *, improved: bool = False,
           versions_root: str | Path | None = None,
           max_not_scored_share: float = MAX_NOT_SCORED_SHARE,
           profiles_root: str | Path | None = None) -> list[Readiness]:
    """One :class:`Readiness` per (agent, agent version, world, world version, API key) in ``records``, sorted:
    each counts its own key's root episodes only, and another key's episodes never change it.

    A version whose lineage (``rehearsal improve``; looked up in the profile store ``profiles_root``,
    default ``$REHEARSAL_AGENT_PROFILES``, else ``./agent_profiles``) says it was improved is judged as
    ``improved`` (holdout only) without a flag; ``improved=True`` forces that for every version."""
    groups: dict[tuple[str, str, str, str], dict[str | None, list[EpisodeRecord]]] = {}
    for r in records:
        groups.setdefault((r.agent, r.agent_version, r.world, r.world_version), {}).setdefault(_key(r), []).append(r)
    return [readiness_of(by_key[key], improved=improved or is_improved(k[0], k[1], profiles_root),
                  versions_root=versions_root, max_not_scored_share=max_not_scored_share, other_keys=tuple(by_key),
                  learned_from=_lineage_scenarios(k[0], k[1], profiles_root))
            for k, by_key in sorted(groups.items()) for key in sorted(by_key, key=_key_name)]


def _lineage_scenarios(agent: str, version: str, profiles_root: str | Path | None) -> tuple[str, ...]:
    """The scenario ids an improvement of ``agent`` ``version`` read (``RUN_ID/SCENARIO#REPEAT`` in its lineage)."""
    lineage = lineage_of(agent, version, profiles_root)
    if lineage is None:
        return ()
    return tuple(sorted({key.split("/", 1)[-1].rsplit("#", 1)[0] for key in lineage.episodes}))
