"""Playing one episode, start to verdict, and recording it; a batch of them on one database.

:func:`run_batch` is the unit of work a worker process or a Ray actor calls
with a batch of :class:`~._plan.EpisodeSpec`.

Who is to blame is decided here for what the policy does (attribution is a contract, see
:mod:`rehearsal_env.verdict`):

- a policy that raises :class:`~rehearsal_env.verdict.NotScoredError` (e.g. a provider error after
  its retries ran out, cause ``provider``) ends the episode ``not_scored`` with that cause and reason;
  the run records it and goes on;
- any other exception from a policy is the agent's bug: that call is a *rejected attempt* (it takes a
  turn, the episode goes on, and a policy that always raises ends at the turn limit, scored); it is
  never ``not_scored``;
- a database that cannot be reset before the episode starts (or a part that raises ``NotScoredError``
  there) gives a not-scored record with that cause (:func:`play` returns it; the worker then
  reconnects, see :mod:`._worker`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..agents import Policy, ProfileError, make_agent
from ..backends import Database, DatabaseError, open_database
from ..env import Episode, RehearsalEnv, failure
from ..records import EpisodeRecord, not_played_record, record_episode
from ..scenarios import Scenario
from ..verdict import NotScoredError, Verdict
from ..worlds import World
from ._models import customer_for, model_agents, stamp
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
    """Reset ``env`` and let ``agent`` act until the episode ends (see the module docstring for a policy
    that raises).

    Raises:
        DatabaseError: the database could not be reset (no episode started).
        NotScoredError: a part other than the agent failed before the episode started.
    """
    observation, info = env.reset(seed=seed)
    while True:
        try:
            action = agent(observation, info)
        except NotScoredError as exc:
            step = env.abort(exc.cause, f"{exc.cause.value} failed: {exc}")
        except ProfileError:  # the provider refused the model or key: every episode would; stop the run
            raise
        except Exception as exc:  # the policy's own bug: a rejected attempt, never "the environment failed"
            step = env.policy_failed(exc)
        else:
            step = env.step(action)
        observation, reward, terminated, truncated, info = step
        if terminated or truncated:
            return EpisodeResult(env.episode, info["verdict"], reward)


def play(config: RunConfig, world: World, db: Database, spec: EpisodeSpec,
         agent_factory: AgentFactory | None = None, *, env: RehearsalEnv | None = None) -> EpisodeRecord:
    """One episode, start to verdict, as a record (on ``env``, an env of the scenario on ``db``, if given).

    An episode whose database fails before it starts is recorded not scored (cause ``database``).
    """
    scenario = world.scenario(spec.scenario)
    if env is None:
        env = env_for(config, world, db, scenario)
    factory = agent_factory or model_agents(config)
    agent = factory(scenario) if factory else make_agent(config.agent, scenario)
    try:
        result = run_episode(env, agent, seed=spec.seed)
    except (DatabaseError, NotScoredError) as exc:
        cause, reason = failure(exc)
        return not_played_record(scenario, run_id=config.run_id, agent=config.agent,
                                 agent_version=agent_version_of(config), repeat=spec.repeat, seed=spec.seed,
                                 backend=config.backend, stress=config.stress, cause=cause,
                                 reason=f"the episode could not start: {reason}",
                                 provenance=run_provenance(config, world))
    return record_of(config, world, spec, result.episode, agent)


def env_for(config: RunConfig, world: World, db: Database, scenario: Scenario) -> RehearsalEnv:
    """The run's env of ``scenario`` on ``db`` (with a model-played customer when the run has one)."""
    return RehearsalEnv(scenario, world, database=db, stress=config.stress, profile=config.profile,
                        customer=customer_for(config, scenario))


def record_of(config: RunConfig, world: World, spec: EpisodeSpec, episode: Episode, agent: object) -> EpisodeRecord:
    """The record of a finished episode of the run, with the model's profile and cost when the agent is one."""
    record = record_episode(episode, run_id=config.run_id, agent=config.agent,
                            agent_version=agent_version_of(config), repeat=spec.repeat, seed=spec.seed,
                            backend=config.backend, stress=config.stress, provenance=run_provenance(config, world))
    return stamp(record, config, agent)


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
