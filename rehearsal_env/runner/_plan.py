"""The run plan every runner shares: what to run, which episodes, in which batches, and its provenance.

The serial loop (:mod:`._serial`), the worker (:mod:`._worker`), resume
(:mod:`._resume`) and the Ray pool (:mod:`._pool`) all read the plan from here;
nothing here plays an episode.
"""

from __future__ import annotations

import difflib
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._version import __version__
from ..agents import Endpoint, Policy
from ..clock import RUN_CONFIG, freeze_time_source, frozen_world, parse_day
from ..provenance import Provenance, provenance_of
from ..records import write_bytes_atomic
from ..scenarios import Scenario
from ..versions import scenarios_not_in_use
from ..worlds import World, load_world

MAX_RETRIES = 10
"""The most retries of a not-scored episode a run may ask for (``RunConfig.retries``)."""
AgentFactory = Callable[[Scenario], Policy]
"""Makes a fresh policy for one episode of a scenario."""


@dataclass(frozen=True)
class RunConfig:
    """What to run (and, apart from it, :attr:`endpoint`: how to reach the model).

    Every field but :attr:`endpoint` and :attr:`concurrency` decides the records; those two may change when
    a run is resumed. :func:`~._resolved.resolve` turns a config into everything a worker reads.
    """

    world: str
    """The world's name."""
    agent: str = "reference"
    """A built-in agent (``reference``, ``null``, ``wrong:<name>``) or a label for a user agent."""
    split: str | None = None
    """Only scenarios of this split (None: all)."""
    scenarios: tuple[str, ...] = ()
    """Only these scenario ids (empty: all of the split)."""
    repeats: int = 1
    """Episodes per scenario."""
    seed: int = 0
    """Base seed; repeat ``k`` resets with ``seed + k``."""
    backend: str = "sqlite"
    """sqlite or postgres."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend options (PostgreSQL: ``dsn``)."""
    stress: bool = True
    """Whether the stress layer is on."""
    reward_profile: str | None = None
    """The reward profile (``benchmark``, ``rl``; None: the outcome reward)."""
    batch_size: int = 32
    """Episodes per batch (one part file each)."""
    run_id: str = field(default_factory=lambda: f"run_{uuid.uuid4().hex[:12]}")
    """The run's id."""
    agent_version: str | None = None
    """The agent's version (None: ``builtin-<package version>`` for a built-in agent, else ``unversioned``)."""
    freeze_time: str | None = None
    """Pin the clock and the day the data is seeded for to this ISO date (None: the world's data_anchor)."""
    freeze_time_source: str = RUN_CONFIG
    """Who pinned the clock: ``rehearsal run`` passes ``--freeze-time``; when ``freeze_time`` is None this is
    always ``world.data_anchor`` (the one value run.json, summary.json and provenance.json all show)."""
    agent_profile: str | None = None
    """The agent profile as TOML when the agent is a model (``rehearsal run`` resolves ``--agent`` to it, so
    workers and a resumed run play exactly this profile); None: a built-in agent or a user's policy."""
    customer: str | None = None
    """``openai:MODEL``: a customer played by that model; None: the scenario's scripted customer."""
    customer_temperature: float = 0.0
    """The model customer's sampling temperature (0: greedy). Above 0 it samples with seed 0 plus each episode's
    reset seed (as a model agent does), so that a rerun of the run hears the same answers."""
    retries: int = 2
    """How often an episode not scored for a part other than the agent and the world (database, provider, sandbox,
    worker) is played again, same scenario and seed, before the run ends; each attempt is recorded (see
    ``runner._retry``). 0: none."""
    endpoint: Endpoint = field(default_factory=Endpoint, compare=False)
    """How to reach the agent's (and a model customer's) model: where it is served, its key's variable, the
    timeout and retries of a call. Not what the run is: a resumed run may reach its model elsewhere."""
    concurrency: int = field(default=1, compare=False)
    """Episodes in flight per worker for a model agent (each with its own database; see ``runner._inflight``);
    how fast the run plays, not what it is."""
    checkpoints: str | None = field(default=None, compare=False)
    """The folder where each in-flight episode is checkpointed after every turn, so that an episode whose worker
    or driver died goes on from its last turn (see ``runner._checkpoints``; e.g. ``<run dir>/checkpoints``).
    None: none kept, a dead worker's episode is played again from its start. Not what the run is."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "freeze_time_source",
                           freeze_time_source(self.freeze_time, self.freeze_time_source))
        check_retries(self.retries)


def check_retries(retries: int) -> int:
    """``retries`` when it is a count of retries the runner plays.

    Raises:
        ValueError: not an integer in ``[0, MAX_RETRIES]``.
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise ValueError(f"retries is how often a not-scored episode is played again, an integer from 0 to "
                         f"{MAX_RETRIES}; got {retries!r}")
    return retries


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to play."""

    scenario: str
    """Scenario id."""
    repeat: int
    """Repeat index."""
    seed: int
    """Reset seed."""


def plan(config: RunConfig, world: World) -> list[EpisodeSpec]:
    """Every episode of the run, in a stable order (scenario, then repeat).

    Raises:
        ValueError: a chosen scenario id the world does not have (with the closest), or none left to play.
    """
    known = {s.id for s in world.scenarios()}
    for wanted in config.scenarios:
        if wanted not in known:
            close = difflib.get_close_matches(wanted, sorted(known), n=3)
            raise ValueError(f"no scenarios of world {world.name!r} match {wanted!r}: the world has no such scenario"
                             f"{'; did you mean ' + ', '.join(map(repr, close)) + '?' if close else ''} "
                             f"(see `rehearsal world show {world.name}`)")
    chosen = [s for s in world.scenarios(config.split)  # type: ignore[arg-type]
              if not config.scenarios or s.id in config.scenarios]
    not_in_use = scenarios_not_in_use(world)  # kept out of, or withdrawn from, the published world version
    for s in chosen:
        if config.scenarios and s.id in not_in_use:
            raise ValueError(f"scenario {s.id!r} is not in use: {not_in_use[s.id]}; choose another")
    chosen = [s for s in chosen if s.id not in not_in_use]
    if not chosen:
        raise ValueError(f"no scenarios of world {world.name!r} match split={config.split!r} "
                         f"scenarios={list(config.scenarios)}; see `rehearsal world show {world.name}`")
    if config.agent.startswith("wrong:"):
        chosen = [s for s in chosen if any(w.name == config.agent for w in s.wrong)]
        if not chosen:
            raise ValueError(f"no chosen scenario has the wrong solution {config.agent!r}")
    return [EpisodeSpec(s.id, k, config.seed + k) for s in chosen for k in range(config.repeats)]


def batches(specs: Sequence[EpisodeSpec], size: int) -> Iterator[list[EpisodeSpec]]:
    """``specs`` in consecutive batches of ``size`` (the last may be shorter); batch ``i`` is part ``i``."""
    for start in range(0, len(specs), size):
        yield list(specs[start:start + size])


def world_for(config: RunConfig) -> World:
    """The run's world, its clock frozen at ``config.freeze_time`` when set (workers load it with this)."""
    return frozen_world(load_world(config.world), config.freeze_time)


def run_provenance(config: RunConfig, world: World) -> Provenance:
    """The run's provenance blob (cached); ``world`` must be :func:`world_for` of ``config``."""
    if config.freeze_time is not None and world.data_anchor != parse_day(config.freeze_time):
        raise ValueError(f"the run freezes time at {config.freeze_time}, but got world {world.name!r} anchored at "
                         f"{world.data_anchor}; load the world with runner.world_for(config)")
    source = freeze_time_source(config.freeze_time, config.freeze_time_source)
    return provenance_of(world, config.reward_profile, source)


def write_provenance(provenance: Provenance, out: Path) -> Path:
    """Write the run's ``provenance.json`` into the run directory, atomically; return its path."""
    path = Path(out) / "provenance.json"
    write_bytes_atomic(path, (json.dumps(provenance.to_dict(), indent=2, sort_keys=True) + "\n").encode())
    return path


def agent_version_of(config: RunConfig) -> str:
    """``config.agent_version``, else ``builtin-<package version>`` for a built-in agent, else ``unversioned``."""
    if config.agent_version is not None:
        return config.agent_version
    if config.agent in ("reference", "null") or config.agent.startswith("wrong:"):
        return f"builtin-{__version__}"
    return "unversioned"
