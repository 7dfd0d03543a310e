"""The Gymnasium env: one scenario of one world on one database backend.

Observation and action spaces are :class:`gymnasium.spaces.Text` over printable
ASCII. An action is a JSON tool call ``{"tool": NAME, "args": {...}}``; an
observation is JSON text with the new customer messages, the last tool result
(status ``ok``, ``error``, ``unknown`` or ``rejected``) and the turn number.
``info["tools"]`` holds the role's tools in OpenAI function-calling format; the
final step's ``info["verdict"]`` holds the :class:`~rehearsal_env.verdict.Verdict`.
"""

from __future__ import annotations

import copy
import warnings
from contextlib import AbstractContextManager
from datetime import date
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from ..backends import Database, DatabaseError, digest, open_database
from ..clock import ENV, freeze_time_source, frozen_world
from ..provenance import Provenance, provenance_of
from ..rewards import evaluate, load_profile
from ..rewards.shaping import GoalShare, final_reward, goal_share, turn_reward
from ..scenarios import Scenario
from ..verdict import NotScoredCause, Verdict
from ..worlds import World, load_world
from ._action import MAX_ACTION_CHARS
from ._checkpoint import encode, version_of
from ._customer import Customer
from ._delta import capture_delta
from ._episode import Episode
from ._fork import copy_database, give_back, spare_database
from ._given import input_of, raised_of
from ._lineage import Lineage, new_episode_id
from ._state import copy_rng, episode_state, load_episode_state, rng_state

CHARSET = "".join(chr(c) for c in range(32, 127))
"""Printable ASCII: observations are JSON with ``ensure_ascii``."""
MAX_OBSERVATION = 1 << 16
MAX_ACTION = MAX_ACTION_CHARS
"""Longest action the env reads, and so the action space's ``max_length``: one number (from :mod:`._action`)
for the space, the env and the HTTP API."""
_SPACES = (spaces.Text(max_length=MAX_OBSERVATION, charset=CHARSET),
           spaces.Text(max_length=MAX_ACTION, charset=CHARSET))
"""The observation and action spaces every env copies (``copy.copy``): gymnasium's ``Text`` builds its character
index in ``__init__`` (about 40 µs, twice an env, once per served episode); a copy shares that index, which nothing
changes, and gets its own random generator when first seeded or sampled (these are never used)."""


class RehearsalEnv(gym.Env[str, str]):
    """A scenario as a Gymnasium env; the verdict comes only from read-only SQL checks.

    Args:
        scenario: A scenario id of ``world`` or a :class:`Scenario`.
        world: A world name or :class:`World` (default: the scenario's world).
        backend: ``"sqlite"`` (embedded default) or ``"postgres"``.
        stress: Whether the stress layer is on (default True).
        reward_profile: The reward profile's name (None: the outcome reward).
        profile: The old name of ``reward_profile`` (kept for one release, with a DeprecationWarning).
        customer: A customer to use instead of the scripted one.
        database: An open database of ``world`` to use (and not close); else the env opens its own.
            With ``freeze_time`` it must be a database of the frozen world (``clock.frozen_world``).
        freeze_time: Pin what the env calls now, and the day the data is seeded for, to this day
            (``YYYY-MM-DD`` or a date); None: the world's own ``data_anchor``.
        backend_options: Passed to the backend (PostgreSQL: ``dsn``).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        scenario: str | Scenario,
        world: str | World | None = None,
        *,
        backend: str = "sqlite",
        stress: bool = True,
        reward_profile: str | None = None,
        profile: str | None = None,
        customer: Customer | None = None,
        database: Database | None = None,
        render_mode: str | None = None,
        freeze_time: str | date | None = None,
        **backend_options: Any,
    ) -> None:
        if isinstance(world, str):
            world = load_world(world)
        if isinstance(scenario, str):
            prefix, slash, bare = scenario.rpartition("/")
            if slash and world is None:
                world = load_world(prefix)
            elif slash and prefix != world.name:  # type: ignore[union-attr]
                raise ValueError(f"scenario {scenario!r} names world {prefix!r}, but the env is of world "
                                 f"{world.name!r}; pass {bare!r} or {world.name + '/' + bare!r}")  # type: ignore[union-attr]
            if world is None:
                raise TypeError("pass world= with a scenario id, or use rehearsal_env.make('world/scenario')")
            scenario = world.scenario(bare)
        self.world: World = frozen_world(world or load_world(scenario.world), freeze_time)
        if freeze_time is not None and any(s.id == scenario.id for s in self.world.scenarios()):
            scenario = self.world.scenario(scenario.id)  # the same task, dated for the frozen day
        self.freeze_time_source = freeze_time_source(freeze_time, ENV)
        """Who pinned the clock (``capabilities.freeze_time_source`` of :meth:`provenance`)."""
        self.scenario: Scenario = scenario
        self.backend = backend
        self.stress = stress
        if profile is not None:
            warnings.warn("RehearsalEnv(profile=...) is now RehearsalEnv(reward_profile=...); the old name goes in "
                          "the next release", DeprecationWarning, stacklevel=2)
            if reward_profile is not None and reward_profile != profile:
                raise ValueError(f"got reward_profile={reward_profile!r} and its old name profile={profile!r}; "
                                 "pass reward_profile alone")
            reward_profile = profile
        shaping = load_profile(reward_profile).shaping if reward_profile is not None else None  # unknown: fails here
        self.profile = reward_profile
        """The reward profile's name (None: the outcome reward)."""
        self.shaped = shaping is not None
        """Whether the profile pays a reward at every turn (``[shaping]``; :mod:`rehearsal_env.rewards.shaping`)."""
        self._start_share: float | None = None
        """The goal share of the state the episode started from (None: not yet measured, e.g. after a restore)."""
        self._potential: float | None = None
        """The potential paid so far, relative to the start (None: not yet measured)."""
        self._goal_share = GoalShare(scenario.goal_checks)
        """The goal share now, its checks run again only when the database changed."""
        self.render_mode = render_mode
        self._customer = customer
        self._backend_options = backend_options
        self._db: Database | None = database
        self._owns_db = database is None
        self._episode: Episode | None = None
        self._closed = False
        self._spare_db = False
        """Whether the database came from the spares of forks (closing the env gives it back; :mod:`._fork`)."""
        self._reset_seed: int | None = None
        """The seed the current episode was reset with (None: reset without one, its random state continued)."""
        self._given: Any = None
        """What the last turn was given, as a chain's turn record keeps it (:mod:`._replay`; None: not keepable)."""
        self.tools = self.world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
        self.observation_space, self.action_space = copy.copy(_SPACES[0]), copy.copy(_SPACES[1])

    @property
    def db(self) -> Database:
        """The env's own database (opened on first use)."""
        if self._db is None:
            self._db = open_database(self.world, self.backend, **self._backend_options)
        return self._db

    def _snapshot(self) -> AbstractContextManager[Database]:
        """A database of this env's world at its untouched snapshot (where an errored check is asked again)."""
        return spare_database(self.world, self.backend, self._backend_options)

    @property
    def episode(self) -> Episode:
        if self._episode is None:
            raise RuntimeError("call reset() before step()")
        return self._episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._reset_seed = seed
        self._closed = False
        self.db.reset()
        begin = getattr(self._customer, "begin_episode", None)
        if begin is not None:  # a sampled customer samples each episode its own way (env._customer)
            begin(0 if seed is None else int(seed))
        self._episode = Episode(self.world, self.scenario, self.db, stress=self.stress, customer=self._customer,
                                snapshot=self._snapshot)
        self._start_share = self._goal_share(self.db) if self.shaped else None
        self._potential = 0.0
        observation = self._episode.start()
        info = {
            "world": self.world.name,
            "scenario": self.scenario.id,
            "split": self.scenario.split,
            "role": self.scenario.role,
            "policies": [p.text for p in self.world.policies],
            "tools": [t.schema() for t in self.tools.values()],
            "seed": seed,
        }
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Carry out one action. Whatever the action (any text, or even not text), this returns: a
        malformed action is a rejected attempt (``info["status"] == "rejected"``) and the episode goes on."""
        self._before()
        self._given = input_of(action)
        return self._after(self.episode.act(action))

    def policy_failed(self, error: BaseException) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step for a policy that raised instead of acting (the agent's bug): a rejected attempt, one turn."""
        self._before()
        self._given = raised_of(error)
        return self._after(self.episode.policy_failed(error))

    def abort(self, cause: NotScoredCause, reason: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """End the episode not scored because ``cause`` (e.g. the model provider) failed; the final step."""
        if self.shaped and self._potential is None:
            self._potential = 0.0  # nothing measurable is owed: a not-scored episode's rewards sum to 0 from here
        self.episode.abort(cause, reason)
        last = self.episode.trace[-1].observation if self.episode.trace else ""
        return self._after(last)

    def _after(self, observation: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode = self.episode
        info: dict[str, Any] = {"turn": episode.turn,
                                "status": episode.trace[-1].status if episode.trace else "error"}
        reward = 0.0
        if episode.verdict is not None:
            info["verdict"] = episode.verdict
            info["outcome"] = episode.verdict.outcome.value
            reward = self._final_reward(episode.verdict, info)
        if self.shaped:
            reward = self._shape(episode, reward, info)
        return observation, reward, episode.ended and not episode.truncated, episode.truncated, info

    def _shape(self, episode: Episode, end_reward: float, info: dict[str, Any]) -> float:
        """This turn's shaped reward (see :mod:`rehearsal_env.rewards.shaping`); ``info`` gets ``potential`` and, at
        the end, ``end_reward`` (the profile's reward of the episode, which the turns' rewards sum to)."""
        before = self._potential if self._potential is not None else 0.0
        if episode.verdict is None:
            shaped = turn_reward(before, self._share_now() - self._start())
        else:
            scored = episode.verdict.outcome_reward is not None
            shaped = final_reward(before, end_reward if scored else None)
            info["end_reward"] = end_reward if scored else None
        self._potential = shaped.potential
        info["potential"] = shaped.potential
        episode.turn_rewards.append(shaped.reward)
        return shaped.reward

    def _before(self) -> None:
        """Measure the potential before this turn where it is not known (an env restored from a checkpoint)."""
        if self.shaped and self._potential is None and self._episode is not None and not self._episode.ended:
            self._potential = self._share_now() - self._start()

    def _share_now(self) -> float:
        return self._goal_share(self.db)

    def _start(self) -> float:
        """The start state's goal share (a restored env measures it on the world's snapshot, where it started)."""
        if self._start_share is None:
            with self._snapshot() as snapshot:
                self._start_share = goal_share(snapshot, self.scenario.goal_checks)
        return self._start_share

    def _final_reward(self, verdict: Verdict, info: dict[str, Any]) -> float:
        """The final step's reward: the outcome reward, or the profile's with its detail in ``info``.

        Under a profile, ``info["reward_detail"]`` carries the components, the gates that zeroed
        the reward and the caveats (e.g. efficiency unmeasured in external mode). A not-scored
        episode's reward is 0.0 in the env (Gymnasium needs a float) and None in records.
        """
        if self.profile is None:
            return verdict.outcome_reward or 0.0
        result = evaluate(self.profile, self.episode, verdict)
        info["reward_detail"] = result.to_dict()
        return 0.0 if result.reward is None else result.reward

    def provenance(self) -> Provenance:
        """The provenance blob of this env's world, profile and clock (what ``rehearsal health`` returns)."""
        return provenance_of(self.world, self.profile, self.freeze_time_source)

    def digest(self) -> str:
        """A SHA-256 of the database's full state (for determinism checks)."""
        return digest(self.db)

    def render(self) -> str | None:
        if self._episode is None or not self._episode.trace:
            return None
        last = self._episode.trace[-1]
        return f"turn {last.turn}: {last.action}\n-> {last.observation}"

    # -- forks and checkpoints (see docs/fork-and-resume.md) -------------------------------
    def fork(self, *, database: Database | None = None) -> RehearsalEnv:
        """A new, independent env in exactly this env's state at this turn (database, episode, random state).

        Continuing the fork and this env with the same actions gives the same observations, database,
        outside-service ledger and verdict; they share no mutable state. The fork's record names this
        episode and turn as its parent. Forking is for whoever runs the env, never an agent action.

        ``database``: a reset database of this world to copy into, which the fork uses and does not close
        (default: a spare of this process's pool, given back when the fork closes).

        Raises:
            RuntimeError: the env is closed, not reset, or its episode has ended.
        """
        episode = self._live("fork")
        state = episode_state(episode)  # first: a customer that cannot be forked fails before any work
        db = copy_database(self.db, self.world, self.backend, self._backend_options, into=database)
        child = copy.copy(self)
        child._db, child._owns_db, child._spare_db, child._closed = db, database is None, database is None, False
        child._np_random = copy_rng(self._np_random)
        child.observation_space, child.action_space = copy.copy(self.observation_space), copy.copy(self.action_space)
        for space, own in ((child.observation_space, self.observation_space), (child.action_space, self.action_space)):
            space._np_random = copy_rng(own._np_random)  # type: ignore[assignment]  # its only mutable part
        twin = getattr(episode.customer, "fork", None)
        customer = twin() if twin is not None else None
        child._customer = customer if self._customer is not None else None
        child._episode = Episode(self.world, self.scenario, db, stress=self.stress, customer=customer,
                                 snapshot=self._snapshot)
        load_episode_state(child._episode, state)
        child._episode.id = None
        child._episode.lineage = Lineage(self._episode_id(episode), episode.turn, "fork")
        return child

    def checkpoint(self) -> bytes:
        """This env's episode as bytes that :func:`rehearsal_env.restore` rebuilds, here or in another process.

        Versioned and self-describing: the format, package and world version, the scenario and a digest
        (:mod:`._checkpoint`). Backend options (a DSN may hold a password) are not saved.

        Raises:
            RuntimeError: the env is closed, not reset, or its episode has ended.
        """
        episode = self._live("checkpoint")
        header = {"world": self.world.name, "world_version": version_of(self.world),
                  "anchor": self.world.data_anchor.isoformat(), "scenario": self.scenario.id,
                  "backend": self.backend, "turn": episode.turn, "episode_id": self._episode_id(episode)}
        payload = {
            "env": {"stress": self.stress, "profile": self.profile, "freeze_time_source": self.freeze_time_source},
            "episode": episode_state(episode),
            "database": capture_delta(self.db).to_json(),
            "rng": rng_state(self._np_random, self._np_random_seed),
        }
        return encode(header, payload)

    def _live(self, what: str) -> Episode:
        if self._closed:
            raise RuntimeError(f"cannot {what} a closed env; {what} before close()")
        if self._episode is None:
            raise RuntimeError(f"cannot {what} an env that was never reset; call reset() first")
        verdict = self._episode.verdict
        if verdict is not None:
            raise RuntimeError(f"cannot {what} an episode that has ended (turn {self._episode.turn}, "
                               f"{verdict.outcome.value}); {what} before its final step, or reset() for a new "
                               "episode")
        return self._episode

    @staticmethod
    def _episode_id(episode: Episode) -> str:
        if episode.id is None:
            episode.id = new_episode_id()
        return episode.id

    def close(self) -> None:
        if self._db is not None and self._owns_db:
            if self._spare_db:
                give_back(self.world, self.backend, self._backend_options, self._db)
            else:
                try:
                    self._db.close()
                except DatabaseError:
                    pass
            self._db = None
        self._closed = True
