"""What every record of a run carries besides its episode, written out once.

A serial run, a Ray actor, an in-flight slot and a served session all make their
records through a :class:`RecordStamp`: the run's id, the agent and its version,
the backend, the stress layer, the provenance and (for a model agent or a model
customer) the model's profile and sampling. Its two methods are the only places
that spell out the record's keyword list.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..agents import AgentProfile, record_fields
from ..env import Episode
from ..provenance import Provenance
from ..records import EpisodeRecord, not_played_record, record_episode
from ..scenarios import Scenario
from ..tools import BUILTIN_TOOLS, retry_operation
from ..verdict import NotScoredCause

NOT_WORLD_TOOLS = frozenset({t.name for t in BUILTIN_TOOLS} | {retry_operation.name})
"""The built-in tools every world has (not the world's own)."""


def world_tool_calls(trace: tuple[Any, ...]) -> int:
    """Calls of the world's own tools that were carried out (not rejected), in a record's trace."""
    return sum(1 for t in trace if not t.rejected and t.tool is not None and t.tool not in NOT_WORLD_TOOLS)


@dataclass(frozen=True)
class RecordStamp:
    """The fields a run stamps on each of its records."""

    run_id: str
    """The run's id (a served run directory's own id for served episodes)."""
    agent: str
    """The agent's name."""
    agent_version: str
    """The agent's version."""
    backend: str
    """The database backend (sqlite, postgres, docker)."""
    stress: bool
    """Whether the stress layer is on."""
    provenance: Provenance
    """The run's provenance (world version, reward profile, clock)."""
    agent_profile: AgentProfile | None = None
    """The model agent's profile (its model and sampling go on the record); None: not a model agent."""
    customer_model: str | None = None
    """The model playing the customer (None: the scripted customer)."""

    def played(self, episode: Episode, *, repeat: int, seed: int, agent: object = None) -> EpisodeRecord:
        """The record of a finished episode; a model's calls and latency come from ``agent.stats``."""
        record = record_episode(episode, run_id=self.run_id, agent=self.agent, agent_version=self.agent_version,
                                repeat=repeat, seed=seed, backend=self.backend, stress=self.stress,
                                provenance=self.provenance)
        record = replace(record, world_tool_calls=world_tool_calls(record.trace),
                         **record_fields(agent, record.trace))  # a model agent's rejected kinds, its prompt's hashes
        profile = self.agent_profile
        if profile is None and self.customer_model is None:
            return record
        sampling = profile.sampling if profile is not None else None
        stats = getattr(agent, "stats", None)
        return replace(
            record, model=profile.model if profile else None,
            temperature=sampling.temperature if sampling else None, top_p=sampling.top_p if sampling else None,
            sampling_seed=sampling.seed if sampling else None, max_tokens=sampling.max_tokens if sampling else None,
            model_calls=stats.calls if stats is not None else None,
            model_latency_ms=stats.latency_ms if stats is not None else None,
            model_held_ms=stats.held_ms if stats is not None else None,
            model_drained_ms=stats.drained_ms if stats is not None else None,
            customer_model=self.customer_model)

    def not_played(self, scenario: Scenario, *, repeat: int, seed: int, reason: str,
                   cause: NotScoredCause = NotScoredCause.WORKER) -> EpisodeRecord:
        """The record of an episode that could not be played to a verdict: not scored for ``cause``."""
        return not_played_record(scenario, run_id=self.run_id, agent=self.agent, agent_version=self.agent_version,
                                 repeat=repeat, seed=seed, backend=self.backend, stress=self.stress, reason=reason,
                                 cause=cause, provenance=self.provenance)
