"""Playing one episode, start to verdict: the one loop body every runner drives, and its record.

:func:`episode_turns` is the episode loop: reset, then for each answer of the
agent one turn, until the episode ends. The serial runner and each Ray actor
drive it with a synchronous policy (:func:`run_episode`), an in-flight worker
with an asynchronous one (:mod:`._inflight`), on the same body; a served
episode takes the same turn (:func:`take_turn`) for each HTTP step.

Who is to blame is decided here for what the policy does (attribution is a contract, see
:mod:`rehearsal_env.verdict`):

- a policy that raises :class:`~rehearsal_env.verdict.NotScoredError` (e.g. a provider error after
  its retries ran out, cause ``provider``) ends the episode ``not_scored`` with that cause and reason;
  the run records it and goes on;
- a policy that raises :class:`~rehearsal_env.agents.ProviderRefused` (the provider refused the model or
  the key: every episode would fail the same way) stops the run;
- any other exception from a policy is the agent's bug: that call is a *rejected attempt* (it takes a
  turn, the episode goes on, and a policy that always raises ends at the turn limit, scored); it is
  never ``not_scored``;
- a database that cannot be reset before the episode starts (or a part that raises ``NotScoredError``
  there) gives a not-scored record with that cause (:func:`play` returns it; the worker then
  reconnects, see :mod:`._worker`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents import Policy, ProviderRefused
from ..backends import Database, DatabaseError, open_database
from ..env import Episode, RehearsalEnv, failure
from ..records import EpisodeRecord
from ..verdict import NotScoredError, Verdict
from ..worlds import World
from ._plan import AgentFactory, EpisodeSpec, RunConfig
from ._resolved import ResolvedRun, resolve

Step = tuple[str, float, bool, bool, dict[str, Any]]
"""What ``env.step`` returns: observation, reward, terminated, truncated, info."""
Answer = str | BaseException
"""What an agent answered a turn with: an action, or the exception it raised instead."""


@dataclass(frozen=True)
class EpisodeResult:
    """A finished episode in memory."""

    episode: Episode
    """The episode (trace, database, scenario)."""
    verdict: Verdict
    """What the checks decided."""
    reward: float
    """The final step's reward under the env's reward profile."""


def take_turn(env: RehearsalEnv, answer: Answer) -> Step:
    """One turn of ``env`` for the agent's ``answer`` (see the module docstring for who is to blame).

    Raises:
        ProviderRefused: the agent raised it (the run stops).
    """
    if isinstance(answer, NotScoredError):
        return env.abort(answer.cause, f"{answer.cause.value} failed: {answer}")
    if isinstance(answer, ProviderRefused) or (isinstance(answer, BaseException) and not isinstance(answer, Exception)):
        raise answer  # a provider's refusal stops the run; so does a KeyboardInterrupt
    if isinstance(answer, BaseException):  # the policy's own bug: a rejected attempt, never "the environment failed"
        return env.policy_failed(answer)
    return env.step(answer)


def episode_turns(env: RehearsalEnv, seed: int) -> Generator[tuple[str, dict[str, Any]], Answer, EpisodeResult]:
    """The episode loop: yields each observation and info, takes the agent's answer, returns the result.

    Raises:
        DatabaseError: the database could not be reset (no episode started).
        NotScoredError: a part other than the agent failed before the episode started.
    """
    observation, info = env.reset(seed=seed)
    while True:
        answer = yield observation, info
        observation, reward, terminated, truncated, info = take_turn(env, answer)
        if terminated or truncated:
            return EpisodeResult(env.episode, info["verdict"], reward)


def advance(turns: Generator[tuple[str, dict[str, Any]], Answer, EpisodeResult],
            answer: Answer) -> tuple[str, dict[str, Any]] | EpisodeResult:
    """Give the loop the agent's answer: the next observation and info, or the result when the episode ended."""
    try:
        return turns.send(answer)
    except StopIteration as done:
        result: EpisodeResult = done.value
        return result


def run_episode(env: RehearsalEnv, agent: Policy, *, seed: int = 0) -> EpisodeResult:
    """Reset ``env`` and let ``agent`` act until the episode ends (see the module docstring for a policy
    that raises).

    Raises:
        DatabaseError: the database could not be reset (no episode started).
        NotScoredError: a part other than the agent failed before the episode started.
    """
    turns = episode_turns(env, seed)
    observation, info = next(turns)
    while True:
        answer: Answer
        try:
            answer = agent(observation, info)
        except Exception as exc:  # judged by take_turn
            answer = exc
        turn = advance(turns, answer)
        if isinstance(turn, EpisodeResult):
            return turn
        observation, info = turn


def play(run: ResolvedRun, db: Database, spec: EpisodeSpec, *, env: RehearsalEnv | None = None) -> EpisodeRecord:
    """One episode of the resolved run, start to verdict, as a record (on ``env`` when given, else a new env
    of the scenario on ``db``).

    An episode whose database fails before it starts is recorded not scored (cause ``database``).
    """
    env = env or run.env(db, spec.scenario)
    agent = run.agent(env.scenario)
    try:
        result = run_episode(env, agent, seed=spec.seed)
    except (DatabaseError, NotScoredError) as exc:
        cause, reason = failure(exc)
        return run.lost(spec, f"the episode could not start: {reason}", cause)
    return run.record(spec, result.episode, agent)


def run_batch(config: RunConfig, specs: Sequence[EpisodeSpec], *, world: World | None = None,
              agent_factory: AgentFactory | None = None, database: Database | None = None) -> list[EpisodeRecord]:
    """Play ``specs`` on one database (opened here unless given) with fresh envs, and return their records."""
    run = resolve(config, agent_factory, world=world)
    db = database or open_database(run.world, config.backend, **config.backend_options)
    try:
        return [play(run, db, spec) for spec in specs]
    finally:
        if database is None:
            db.close()
