"""A worker's state: one world, one database and one env per scenario, built once, reset per episode.

The serial runner holds one :class:`EpisodeWorker` in its own process; each
Ray actor holds one in its process. Every episode runs ``env.reset`` on the
worker's database, so reusing the env across episodes yields the same records
as building a fresh env per episode (:func:`~rehearsal_env.runner.play`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backends import Database, DatabaseError, open_database
from ..env import RehearsalEnv
from ..records import EpisodeRecord, not_played_record
from ..worlds import World
from ._plan import AgentFactory, EpisodeSpec, RunConfig, agent_version_of, run_provenance, world_for
from ._play import play


class EpisodeWorker:
    """Plays episodes of one run on its own database; one per process (serial) or per Ray actor.

    Args:
        config: The run's configuration.
        agent_factory: Makes a fresh policy per episode (None: the built-in agent ``config.agent``).
        world: The run's world (:func:`~._plan.world_for` of ``config`` when None).
        database: An open database of the world to use and not close (opened here when None).
    """

    def __init__(self, config: RunConfig, agent_factory: AgentFactory | None = None, *,
                 world: World | None = None, database: Database | None = None) -> None:
        self.config = config
        self.agent_factory = agent_factory
        self.world = world or world_for(config)
        self._owns_db = database is None
        self.db = database or open_database(self.world, config.backend, **config.backend_options)
        self._envs: dict[str, RehearsalEnv] = {}

    def env(self, scenario_id: str) -> RehearsalEnv:
        """The worker's env for a scenario, built on first use."""
        env = self._envs.get(scenario_id)
        if env is None:
            env = RehearsalEnv(self.world.scenario(scenario_id), self.world, database=self.db,
                               stress=self.config.stress, profile=self.config.profile)
            self._envs[scenario_id] = env
        return env

    def play(self, spec: EpisodeSpec) -> EpisodeRecord:
        """One episode, reset to verdict, as a record."""
        return play(self.config, self.world, self.db, spec, self.agent_factory, env=self.env(spec.scenario))

    def play_batch(self, specs: Sequence[EpisodeSpec]) -> list[EpisodeRecord]:
        """Episodes in order, as records."""
        return [self.play(spec) for spec in specs]

    def close(self) -> None:
        """Close the database if the worker opened it."""
        self._envs.clear()
        if self._owns_db:
            try:
                self.db.close()
            except DatabaseError:
                pass


def lost_record(config: RunConfig, world: World, spec: EpisodeSpec, reason: str) -> EpisodeRecord:
    """The record of an episode that could not be played to a verdict: not scored, with the reason."""
    return not_played_record(world.scenario(spec.scenario), run_id=config.run_id, agent=config.agent,
                             agent_version=agent_version_of(config), repeat=spec.repeat, seed=spec.seed,
                             backend=config.backend, stress=config.stress, reason=reason,
                             provenance=run_provenance(config, world))


