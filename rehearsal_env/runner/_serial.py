"""Running episodes: one database per worker, built once and reset per episode.

:func:`run_batch` is the unit of work (a worker process or a Ray actor calls
it with a batch of :class:`EpisodeSpec`); :func:`run` plans a run, executes
the batches, writes records as batches finish and the summary at the end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..agents import Policy, make_agent
from ..backends import Database, open_database
from ..clock import RUN_CONFIG, freeze_time_source, frozen_world, parse_day
from ..env import Episode, RehearsalEnv
from ..provenance import Provenance, provenance_of
from ..records import EpisodeRecord, record_episode, write_bytes_atomic, write_part
from ..scenarios import Scenario
from ..verdict import Verdict
from ..versions import scenarios_not_in_use
from ..worlds import World, load_world
from ._summary import Summarized, summarize

AgentFactory = Callable[[Scenario], Policy]
"""Makes a fresh policy for one episode of a scenario."""


@dataclass(frozen=True)
class RunConfig:
    """What to run."""

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
    profile: str | None = None
    """Reward profile (None: the outcome reward)."""
    batch_size: int = 32
    """Episodes per batch (one part file each)."""
    run_id: str = field(default_factory=lambda: f"run_{uuid.uuid4().hex[:12]}")
    """The run's id."""
    agent_version: str | None = None
    """The agent's version (None: ``builtin-<package version>`` for a built-in agent, else ``unversioned``)."""
    freeze_time: str | None = None
    """Pin the clock and the day the data is seeded for to this ISO date (None: the world's data_anchor)."""
    freeze_time_source: str = RUN_CONFIG
    """Who pinned the clock when ``freeze_time`` is set (``rehearsal run`` passes ``--freeze-time``)."""


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
    """Every episode of the run, in a stable order (scenario, then repeat)."""
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


def world_for(config: RunConfig) -> World:
    """The run's world, its clock frozen at ``config.freeze_time`` when set (workers load it with this)."""
    return frozen_world(load_world(config.world), config.freeze_time)


def run_provenance(config: RunConfig, world: World) -> Provenance:
    """The run's provenance blob (cached); ``world`` must be :func:`world_for` of ``config``."""
    if config.freeze_time is not None and world.data_anchor != parse_day(config.freeze_time):
        raise ValueError(f"the run freezes time at {config.freeze_time}, but got world {world.name!r} anchored at "
                         f"{world.data_anchor}; load the world with runner.world_for(config)")
    source = freeze_time_source(config.freeze_time, config.freeze_time_source)
    return provenance_of(world, config.profile, source)


def write_provenance(config: RunConfig, out: Path, world: World | None = None) -> Path:
    """Write ``provenance.json`` into the run directory, atomically; return its path."""
    blob = run_provenance(config, world or world_for(config)).to_dict()
    path = Path(out) / "provenance.json"
    write_bytes_atomic(path, (json.dumps(blob, indent=2, sort_keys=True) + "\n").encode())
    return path


def agent_version_of(config: RunConfig) -> str:
    """``config.agent_version``, else ``builtin-<package version>`` for a built-in agent, else ``unversioned``."""
    if config.agent_version is not None:
        return config.agent_version
    if config.agent in ("reference", "null") or config.agent.startswith("wrong:"):
        from .. import __version__

        return f"builtin-{__version__}"
    return "unversioned"


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


def batches(specs: Sequence[EpisodeSpec], size: int) -> Iterator[list[EpisodeSpec]]:
    for start in range(0, len(specs), size):
        yield list(specs[start:start + size])


def run(config: RunConfig, out_dir: str | Path, *, agent_factory: AgentFactory | None = None,
        on_batch: Callable[[list[EpisodeRecord]], None] | None = None, resume: bool = False,
        progress: bool = False) -> dict[str, Any]:
    """Run serially in this process, write records and ``summary.json`` to ``out_dir``; return the summary.

    ``resume`` continues the run in ``out_dir`` (its ``run.json``), playing only unrecorded episodes;
    ``progress`` draws a progress line on a terminal's stderr.
    """
    from ._progress import Progress
    from ._resume import finish_run, start_run
    from ._summary import SummaryRow, summary_row
    from ._worker import EpisodeWorker

    out = Path(out_dir)
    state = start_run(config, out, resume=resume)
    bar = Progress(len(state.specs), done=state.recorded, enabled=progress)
    worker = EpisodeWorker(state.config, agent_factory, world=state.world)
    bar.start()
    played: list[SummaryRow] = []
    try:
        for batch in state.pending:
            done = worker.play_batch(batch.specs)
            write_part(out, done, batch.part)
            played.extend(summary_row(r) for r in done)
            bar.update([r.outcome for r in done])
            if on_batch:
                on_batch(done)
    finally:
        worker.close()
        bar.close()
    return finish_run(state, out, played)


def write_summary(config: RunConfig, out: Path, records: Sequence[Summarized]) -> dict[str, Any]:
    summary = summarize(records)
    summary["config"] = {k: v for k, v in asdict(config).items() if k != "backend_options"}
    write_provenance(config, out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary
