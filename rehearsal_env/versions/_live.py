"""The live attempt: a model agent tries every scenario of a world version (``--live-agent PROFILE``).

The seeds' validation table ends with "A live agent can attempt it", and the
re-check "tries each one with a live agent". Each attempt is one episode of the
agent profile on the build's database, recorded with its outcome, ending, turns,
rejected attempts, and the **facts it could not find**: the keys the reference
solution passes (an argument named ``id``, ``*_id``, ``email`` or ``sku``, as in
:mod:`._reach`) that never appeared in anything the live agent saw (the request,
tool results, customer messages).

An attempt is evidence for people reading the world page, never a verdict on the
scenario: a weak model failing withdraws nothing. Withdrawal stays decided by the
fairness analysis (:mod:`._validate`), which asks whether a *careful* agent can
pass. Attempts are appended to the version's ``live_attempts.jsonl``; they are
not part of the version's content and never change its id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..agents import AgentProfile, Endpoint, ModelAgents, ProviderRefused
from ..backends import Database, open_database
from ..env import RehearsalEnv
from ..scenarios import Scenario
from ..verdict import NotScoredError
from ..worlds import World
from ._reach import is_key, shows

LIVE_FILE = "live_attempts.jsonl"
"""The append-only file of live attempts in a version's folder."""


@dataclass(frozen=True)
class LiveAttempt:
    """One live agent's attempt at one scenario."""

    scenario: str
    """The scenario id."""
    agent: str
    """The agent profile, ``NAME@vN`` (or ``NAME`` when unregistered)."""
    model: str | None
    """The profile's model."""
    outcome: str
    """``verified``, ``not_achieved``, ``rule_violated`` or ``not_scored`` (the provider failed)."""
    ending: str
    """How the episode stopped."""
    turns: int
    """Steps taken."""
    rejected_attempts: int
    """Actions the env did not carry out."""
    missing_facts: tuple[str, ...]
    """The reference's keys the agent never saw, as ``name=value``; empty when it saw them all."""
    reason: str | None
    """Why the attempt was not scored; None when it was."""
    recorded_at: str
    """Wall-clock time of the attempt (UTC, ISO-8601); a diagnostic, not part of any version."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["missing_facts"] = list(self.missing_facts)
        return out

    @staticmethod
    def from_dict(data: dict[str, Any]) -> LiveAttempt:
        return LiveAttempt(**{**data, "missing_facts": tuple(data.get("missing_facts") or ())})


def reference_keys(scenario: Scenario) -> list[tuple[str, Any]]:
    """The keys the reference solution passes, in order, without repeats."""
    out: list[tuple[str, Any]] = []
    for call in scenario.solution("reference").calls:
        for name, value in call.args.items():
            if is_key(name, value) and (name, value) not in out:
                out.append((name, value))
    return out


def missing_facts(scenario: Scenario, seen: Iterable[str]) -> tuple[str, ...]:
    """The reference's keys that appear in none of ``seen`` (the texts the live agent was shown)."""
    text = "\n".join(seen)
    return tuple(f"{name}={value}" for name, value in reference_keys(scenario) if not shows(text, value))


def attempt(world: World, scenario: Scenario, db: Database, agents: ModelAgents, *, seed: int = 0) -> LiveAttempt:
    """One live episode of ``scenario`` on ``db``.

    Raises:
        ProviderRefused: the provider refused the model or key (the build stops: fix the profile).
    """
    env = RehearsalEnv(scenario, world, database=db)
    agent = agents(scenario)
    observation, info = env.reset(seed=seed)
    seen = [observation]
    reason = None
    while True:
        try:
            action = agent(observation, info)
        except ProviderRefused:
            raise
        except NotScoredError as exc:
            env.episode.abort(exc.cause, str(exc))
            reason = str(exc)
            break
        observation, _, terminated, truncated, info = env.step(action)
        seen.append(observation)
        if terminated or truncated:
            break
    verdict = env.episode.verdict
    assert verdict is not None
    profile = agents.profile
    return LiveAttempt(scenario=scenario.id, agent=profile.ref, model=profile.model, outcome=verdict.outcome.value,
                       ending=verdict.ending.value, turns=verdict.metrics.turns,
                       rejected_attempts=verdict.metrics.rejected_attempts,
                       missing_facts=missing_facts(scenario, seen), reason=reason or verdict.reason,
                       recorded_at=datetime.now(UTC).isoformat(timespec="seconds"))


def attempt_all(world: World, scenarios: Sequence[Scenario], db: Database, profile: AgentProfile,
                endpoint: Endpoint) -> tuple[LiveAttempt, ...]:
    """Every scenario attempted once by ``profile`` (in order) on ``db``."""
    agents = ModelAgents(profile, endpoint)
    return tuple(attempt(world, s, db, agents) for s in scenarios)


def save_attempts(folder: Path, attempts: Sequence[LiveAttempt]) -> Path:
    """Append ``attempts`` to the version folder's :data:`LIVE_FILE`; return its path."""
    path = Path(folder) / LIVE_FILE
    with path.open("a") as out:
        for a in attempts:
            out.write(json.dumps(a.to_dict(), sort_keys=True) + "\n")
    return path


def load_attempts(folder: Path) -> tuple[LiveAttempt, ...]:
    """Every live attempt recorded in a version folder, oldest first (empty when none)."""
    path = Path(folder) / LIVE_FILE
    if not path.is_file():
        return ()
    return tuple(LiveAttempt.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip())


def latest_by_scenario(attempts: Sequence[LiveAttempt]) -> dict[str, LiveAttempt]:
    """The most recent attempt of each scenario."""
    return {a.scenario: a for a in attempts}


def describe_attempt(a: LiveAttempt) -> str:
    """One line for the world page: outcome, turns, rejected attempts, the facts not found."""
    text = f"{a.agent}: {a.outcome} ({a.ending}, {a.turns} turns, {a.rejected_attempts} rejected)"
    if a.missing_facts:
        text += f"; did not find {', '.join(a.missing_facts)}"
    if a.reason:
        text += f"; {a.reason}"
    return text


def attempt_version(world: World, folder: Path, scenario_ids: Sequence[str], profile: AgentProfile,
                    endpoint: Endpoint, *, backend: str = "sqlite") -> tuple[LiveAttempt, ...]:
    """Attempt ``scenario_ids`` of the version published in ``folder`` with ``profile``; append the attempts
    to its :data:`LIVE_FILE` and return them (nothing else in the folder changes)."""
    db = open_database(world, backend)
    try:
        attempts = attempt_all(world, [world.scenario(s) for s in scenario_ids], db, profile, endpoint)
    finally:
        db.close()
    save_attempts(folder, attempts)
    return attempts
