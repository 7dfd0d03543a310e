"""The run directory's plan (``run.json``), and what is left to play when a run is resumed.

A run starts by writing ``run.json``: the config (less backend options, which
may hold credentials) and every planned episode. Batch ``i`` of the plan is
written as part ``i`` of ``episodes.parquet/`` whichever worker finishes it
and whenever, so the parts of a parallel run are the parts of a serial run.
Resuming reads ``run.json`` back, reads the records already written and plays
only the episodes that have none. Before that it removes what cannot stand:

- a damaged part (truncated, bytes changed, not in the manifest): removed, so its
  episodes are played again and the part is rewritten;
- the records of episodes not scored because a part other than the agent or the
  world failed (:data:`REPLAYED_CAUSES`: the database, the model provider, the
  sandbox, a worker): dropped from their part, so they are played again. Not scored
  for the world's own code is kept (playing it again fails the same way).

So a run cut short by a dead server, resumed, holds the records of an
uninterrupted run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

import pyarrow.parquet as pq

from ..agents import Endpoint
from ..records import (
    EPISODES_DIR,
    LEGACY_MANIFEST,
    MANIFEST,
    RECORD_VERSION,
    damaged_parts,
    forget_parts,
    part_files,
    part_version,
    read_part,
    seal_run,
    unseal,
    write_bytes_atomic,
    write_part,
)
from ..verdict import NotScoredCause
from ._plan import AgentFactory, EpisodeSpec, RunConfig, batches, plan, write_provenance
from ._resolved import ResolvedRun, resolve
from ._summary import SummaryRow, summary_rows, write_summary

RUN_FILE = "run.json"
RUN_FILE_VERSION = 1
REPLAYED_CAUSES = frozenset({NotScoredCause.DATABASE.value, NotScoredCause.PROVIDER.value,
                             NotScoredCause.SANDBOX.value, NotScoredCause.WORKER.value})
"""Not-scored causes whose episodes ``--resume`` plays again (the failed part may work now)."""


@dataclass(frozen=True)
class Batch:
    """Episodes played by one worker call and written as one part file."""

    index: int
    """The batch's position in the plan."""
    part: int
    """The part number its records are written to (``index`` unless that part already exists)."""
    specs: tuple[EpisodeSpec, ...]
    """Its episodes, in plan order."""


@dataclass(frozen=True)
class RunState:
    """A run about to play: the run resolved, its whole plan, and the batches still to play."""

    run: ResolvedRun
    """The run, resolved once (its config is the one stored in ``run.json`` when resuming)."""
    new: bool
    """Whether this is a new run (its ``run.json`` is written by :func:`begin_run`), not a resumed one."""
    specs: tuple[EpisodeSpec, ...]
    """Every planned episode, in order."""
    pending: tuple[Batch, ...]
    """Batches with episodes not yet recorded."""
    previous: tuple[SummaryRow, ...]
    """What the summary reads of the episodes already recorded (resuming)."""

    @property
    def config(self) -> RunConfig:
        """The run's config."""
        return self.run.config

    @property
    def recorded(self) -> int:
        """Episodes of the plan already recorded."""
        return len(self.previous)


def start_run(config: RunConfig, out: Path, *, resume: bool = False,
              agent_factory: AgentFactory | None = None) -> RunState:
    """Resolve ``config`` and plan it: a new run in ``out``, or the rest of the run there.

    Nothing of a new run is written yet (a part it needs may still fail to start): once its worker or
    pool has started, :func:`begin_run` replaces any run in ``out`` with this one. Resuming removes the
    damaged parts and the records to play again first.

    Raises:
        FileNotFoundError: resuming a directory without ``run.json``.
        ValueError: resuming with a config other than the stored one.
    """
    run = resolve(config, agent_factory)
    if resume:
        stored = load_config(out, backend_options=config.backend_options)
        if stored != config:
            diff = [f"{f.name}: stored {getattr(stored, f.name)!r}, given {getattr(config, f.name)!r}"
                    for f in fields(RunConfig) if f.compare and getattr(stored, f.name) != getattr(config, f.name)]
            raise ValueError(f"{out / RUN_FILE} holds another run's config ({'; '.join(diff)}); resume with "
                             f"load_config({str(out)!r}), or start a new run in another directory")
        specs = load_plan(out)
        has_parts = _prepare_resume(out)
        done = summary_rows(out) if has_parts else {}
        existing = {int(p.stem.split("-")[1]) for p in (out / EPISODES_DIR).glob("part-*.parquet")}
    else:
        specs = plan(config, run.world)
        done, existing = {}, set()
    spare = max([-(-len(specs) // config.batch_size), *(p + 1 for p in existing)])
    pending: list[Batch] = []
    for index, batch in enumerate(batches(specs, config.batch_size)):
        todo = tuple(s for s in batch if (s.scenario, s.repeat) not in done)
        if not todo:
            continue
        part = index
        if index in existing:  # the batch was partly written (a stopped run, ._flush): the rest in a new part
            part, spare = spare, spare + 1
        pending.append(Batch(index, part, todo))
    previous = tuple(done[(s.scenario, s.repeat)] for s in specs if (s.scenario, s.repeat) in done)
    return RunState(run, not resume, tuple(specs), tuple(pending), previous)


def begin_run(state: RunState, out: Path) -> None:
    """The run can start: a new run replaces any run in ``out`` and writes its ``run.json``; either way
    ``provenance.json`` is written."""
    if state.new:
        _clear(out)
        save_run(out, state.config, list(state.specs))
    unseal(out)  # a run that writes is unsealed until it finishes (finish_run seals it)
    write_provenance(state.run.provenance, out)


def _prepare_resume(out: Path) -> bool:
    """Remove damaged parts and the records of episodes to play again (see the module docstring); return
    whether any part is left."""
    directory = out / EPISODES_DIR
    try:
        parts = part_files(out)
    except FileNotFoundError:
        return False
    damaged = damaged_parts(parts)
    for path in damaged:
        path.unlink()
    forget_parts(directory, [p.name for p in damaged])
    for path in (p for p in parts if p not in damaged and part_version(p) == str(RECORD_VERSION)):
        causes = pq.read_table(path, columns=["not_scored_cause"]).column("not_scored_cause").to_pylist()
        if not REPLAYED_CAUSES.intersection(c for c in causes if c):
            continue
        number = int(path.stem.split("-")[1])
        kept = [r for r in read_part(path) if r.not_scored_cause not in REPLAYED_CAUSES]
        if kept:
            write_part(out, kept, number)
        else:
            path.unlink()
            forget_parts(directory, [path.name])
    return any(directory.glob("part-*.parquet"))


def finish_run(state: RunState, out: Path, played: Sequence[SummaryRow]) -> dict[str, Any]:
    """Write ``summary.json`` over the episodes recorded before and those ``played`` now, seal the run
    (records, plan, provenance and summary; :func:`rehearsal_env.records.seal_run`); return the summary."""
    summary = write_summary(state.run, out, [*state.previous, *played])
    if any((out / EPISODES_DIR / name).is_file() for name in (MANIFEST, LEGACY_MANIFEST)):
        seal_run(out)
    return summary


class RunStopped(RuntimeError):
    """A run stopped before its end because a part it needs failed; ``summary.json`` covers what was recorded."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary
        """The summary written for the episodes recorded."""


def stop_run(state: RunState, out: Path, played: Sequence[SummaryRow], error: BaseException) -> NoReturn:
    """Write ``summary.json`` for what was recorded and raise :class:`RunStopped` with a one-line message."""
    summary = finish_run(state, out, played)
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    raise RunStopped(f"the run stopped after {summary['episodes']} of {len(state.specs)} episodes: {first}; "
                     f"{out / 'summary.json'} covers those recorded; once the failed part is back, finish it "
                     f"with `rehearsal run --resume {out}`", summary) from error


def save_run(out: Path, config: RunConfig, specs: list[EpisodeSpec]) -> Path:
    """Write ``run.json``: the config (less backend options) and the plan."""
    out.mkdir(parents=True, exist_ok=True)
    stored = {k: v for k, v in asdict(config).items() if k != "backend_options"}
    body = {"version": RUN_FILE_VERSION, "config": stored,
            "episodes": [[s.scenario, s.repeat, s.seed] for s in specs]}
    path = out / RUN_FILE
    write_bytes_atomic(path, (json.dumps(body, indent=1) + "\n").encode())
    return path


def load_config(out: str | Path, *, backend_options: dict[str, Any] | None = None) -> RunConfig:
    """The config stored in a run directory's ``run.json`` (backend options are not stored: pass them)."""
    stored = _migrate(dict(_read(Path(out))["config"]))
    known = {f.name for f in fields(RunConfig)}
    unknown = sorted(set(stored) - known)
    if unknown:
        raise ValueError(f"{Path(out) / RUN_FILE} has config fields this version does not know: {unknown}; "
                         "resume it with the rehearsal-env version that started it")
    stored["scenarios"] = tuple(stored.get("scenarios", ()))
    stored["endpoint"] = Endpoint(**stored.get("endpoint", {}))
    return RunConfig(**stored, backend_options=dict(backend_options or {}))


_FLAT_ENDPOINT = {"base_url": "base_url", "api_key_env": "api_key_env", "model_timeout_s": "timeout_s",
                  "model_max_retries": "max_retries"}
"""The endpoint's fields as earlier run.json files stored them, flat in the config."""


def _migrate(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored config in this version's shape: ``profile`` is ``reward_profile``, the endpoint is one field."""
    if "profile" in stored and "reward_profile" not in stored:
        stored["reward_profile"] = stored.pop("profile")
    flat = {new: stored.pop(old) for old, new in _FLAT_ENDPOINT.items() if old in stored}
    if flat:
        stored["endpoint"] = {**flat, **stored.get("endpoint", {})}
    return stored


def load_plan(out: str | Path) -> list[EpisodeSpec]:
    """The planned episodes stored in a run directory's ``run.json``."""
    return [EpisodeSpec(str(s), int(k), int(seed)) for s, k, seed in _read(Path(out))["episodes"]]


def _read(out: Path) -> dict[str, Any]:
    path = out / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {RUN_FILE} in {out}; --resume takes the directory of a run started by "
                                "`rehearsal run` (its --out)")
    body: dict[str, Any] = json.loads(path.read_text())
    if body.get("version") != RUN_FILE_VERSION:
        raise ValueError(f"{path} has version {body.get('version')!r}, expected {RUN_FILE_VERSION}")
    return body


def _clear(out: Path) -> None:
    """Remove a previous run's plan, records and summary from ``out`` (nothing else)."""
    for path in [*(out / EPISODES_DIR).glob("part-*.parquet"), *(out / EPISODES_DIR).glob(".part-*.tmp"),
                 out / EPISODES_DIR / MANIFEST, out / EPISODES_DIR / LEGACY_MANIFEST,
                 out / RUN_FILE, out / "summary.json", out / "provenance.json"]:
        path.unlink(missing_ok=True)
    for derived in out.glob("rescore-*"):  # what `rehearsal eval rescore` made of the previous run
        if derived.is_dir() and (derived / EPISODES_DIR).is_dir():
            shutil.rmtree(derived)
