"""A run resolved once: everything a worker reads, built from the config in one place.

:func:`resolve` turns a :class:`~._plan.RunConfig` into a :class:`ResolvedRun`:
the world with its clock frozen, the provenance, the record stamp, the agent
factory (a user's, a model profile's, or a built-in agent's) and the customer.
It is built once per run (by the runner), once per Ray actor and once per
in-flight worker; every episode then reads it, so nothing (the world, the
profile's TOML, the provenance) is loaded or parsed again per episode.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..agents import AgentProfile, ModelAgents, Policy, make_agent
from ..backends import Database
from ..env import Customer, Episode, RehearsalEnv
from ..provenance import Provenance
from ..records import EpisodeRecord
from ..scenarios import Scenario
from ..verdict import NotScoredCause
from ..worlds import World
from ._models import customer_model, model_agents, model_customer, run_profile
from ._plan import AgentFactory, EpisodeSpec, RunConfig, agent_version_of, run_provenance, world_for
from ._stamp import RecordStamp


@dataclass(frozen=True)
class ResolvedRun:
    """One run's settings, resolved: read by every episode of the run in this process."""

    config: RunConfig
    """What to run (and how to reach its model)."""
    world: World
    """The run's world, its clock frozen at ``config.freeze_time`` when set."""
    provenance: Provenance
    """The run's provenance (world version, reward profile, who pinned the clock)."""
    stamp: RecordStamp
    """What every record of the run carries besides its episode."""
    agents: AgentFactory
    """Makes a fresh policy per episode: the user's factory, the model profile's, or the built-in agent's."""
    model_agents: ModelAgents | None
    """The model profile's factory when the agent is an ``openai`` model (its episodes may play in flight)."""
    customer_model: str | None
    """The model playing the customer (None: each scenario's scripted customer)."""

    def customer(self, scenario: Scenario) -> Customer | None:
        """The customer of an env of ``scenario`` (None: the env's scripted one)."""
        return model_customer(self.customer_model, self.config.endpoint, scenario, self.config.customer_temperature)

    def env(self, db: Database, scenario_id: str) -> RehearsalEnv:
        """The run's env of a scenario on ``db``."""
        scenario = self.world.scenario(scenario_id)
        return RehearsalEnv(scenario, self.world, database=db, stress=self.config.stress,
                            reward_profile=self.config.reward_profile, customer=self.customer(scenario))

    def agent(self, scenario: Scenario) -> Policy:
        """A fresh policy for one episode of ``scenario``."""
        return self.agents(scenario)

    def record(self, spec: EpisodeSpec, episode: Episode, agent: object = None) -> EpisodeRecord:
        """The record of a finished episode of the run (with the model's cost from ``agent``)."""
        return self.stamp.played(episode, repeat=spec.repeat, seed=spec.seed, agent=agent)

    def lost(self, spec: EpisodeSpec, reason: str, cause: NotScoredCause = NotScoredCause.WORKER) -> EpisodeRecord:
        """The record of an episode that could not be played to a verdict: not scored for ``cause``."""
        return self.stamp.not_played(self.world.scenario(spec.scenario), repeat=spec.repeat, seed=spec.seed,
                                     reason=reason, cause=cause)


def resolve(config: RunConfig, agent_factory: AgentFactory | None = None, *,
            world: World | None = None) -> ResolvedRun:
    """Resolve ``config`` once: load (or take) its world, parse its agent profile, make its stamp.

    Raises:
        ValueError: a world not frozen as the config says, an invalid agent profile or customer.
        KeyError: an unknown world.
    """
    world = world or world_for(config)
    provenance = run_provenance(config, world)
    profile: AgentProfile | None = run_profile(config)
    models = model_agents(profile, config.endpoint) if agent_factory is None else None
    customer = customer_model(config)
    stamp = RecordStamp(run_id=config.run_id, agent=config.agent, agent_version=agent_version_of(config),
                        backend=config.backend, stress=config.stress, provenance=provenance,
                        agent_profile=profile, customer_model=customer)
    agents: AgentFactory = agent_factory or models or functools.partial(make_agent, config.agent)
    return ResolvedRun(config, world, provenance, stamp, agents, models, customer)
