"""Playing one episode, start to verdict, and recording it; a batch of them on one database.

:func:`run_batch` is the unit of work a worker process or a Ray actor calls
with a batch of :class:`~._plan.EpisodeSpec`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..agents import Policy, make_agent
from ..backends import Database, open_database
from ..env import Episode, RehearsalEnv
from ..records import EpisodeRecord, record_episode
from ..verdict import Verdict
from ..worlds import World
from ._plan import AgentFactory, EpisodeSpec, RunConfig, agent_version_of, run_provenance, world_for


@dataclass(frozen=True)
class EpisodeResult:
    """A finished episode in memory."""

    episode: Episode
    """The episode (trace, database, scenario)."""
    verdict: Verdict
    """What the checks decided."""
    reward: float
    """The final step's reward under the env's profile."""


def run_episode(env: RehearsalEnv, agent: Policy, *, seed: int = 0) -> EpisodeResult:
    """Reset ``env`` and let ``agent`` act until the episode ends."""
    observation, info = env.reset(seed=seed)
    while True:
        observation, reward, terminated, truncated, info = env.step(agent(observation, info))
        if terminated or truncated:
            return EpisodeResult(env.episode, info["verdict"], reward)


def play(config: RunConfig, world: World, db: Database, spec: EpisodeSpec,
         agent_factory: AgentFactory | None = None, *, env: RehearsalEnv | None = None) -> EpisodeRecord:
    """One episode, start to verdict, as a record (on ``env``, an env of the scenario on ``db``, if given)."""
    scenario = world.scenario(spec.scenario)
    if env is None:
        env = RehearsalEnv(scenario, world, database=db, stress=config.stress, profile=config.profile)
    agent = agent_factory(scenario) if agent_factory else make_agent(config.agent, scenario)
    result = run_episode(env, agent, seed=spec.seed)
    return record_episode(result.episode, run_id=config.run_id, agent=config.agent,
                          agent_version=agent_version_of(config), repeat=spec.repeat, seed=spec.seed,
                          backend=config.backend, stress=config.stress, provenance=run_provenance(config, world))


def run_batch(config: RunConfig, specs: Sequence[EpisodeSpec], *, world: World | None = None,
              agent_factory: AgentFactory | None = None, database: Database | None = None) -> list[EpisodeRecord]:
    """Play ``specs`` on one database (opened here unless given) and return their records."""
    world = world or world_for(config)
    db = database or open_database(world, config.backend, **config.backend_options)
    try:
        return [play(config, world, db, spec, agent_factory) for spec in specs]
    finally:
        if database is None:
            db.close()
