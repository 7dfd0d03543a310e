"""Episode records on disk: a directory ``episodes.parquet/`` of atomically written parts.

Finished episodes are written as part files, each to a hidden temporary name,
flushed to disk and renamed into place, so a killed run keeps every part it
finished and no half-written file is ever read as a record (readers only see
``part-*.parquet``; pyarrow and duckdb skip the hidden ``.part-*.tmp`` names).
``pyarrow.parquet.read_table(RUN_DIR / "episodes.parquet")``, pandas'
``read_parquet`` and duckdb's ``read_parquet('RUN_DIR/episodes.parquet/*.parquet')``
read the directory as one table, with no import of ``rehearsal_env``.

Every part written is entered in the directory's manifest (:mod:`._manifest`); every
reader here compares the manifest with the files in both directions, refuses a directory
mixing runs, and (:func:`read_table`, :func:`read_records`, :func:`sealed_parts`) checks the
run's seal against the trusted keys (:mod:`._seal`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .._atomic import write_atomic
from ._manifest import EPISODES_DIR, check_one_run, manifest_problems, note_part, verify_directory
from ._record import RECORD_VERSION, EpisodeRecord
from ._schema import arrow_schema, from_row, to_row
from ._seal import seal_problems, verify_seal
from ._signing import PublicKey

VERSION_KEY = "rehearsal.record_version"
"""Schema metadata key holding :data:`RECORD_VERSION`."""

SCHEMA: pa.Schema = arrow_schema(EpisodeRecord, {VERSION_KEY: str(RECORD_VERSION),
                                                 "rehearsal.doc": "One row per episode; see each field's doc."})
"""The Arrow schema of a record file (every field carries its docstring as ``doc`` metadata)."""

_PART = re.compile(r"^part-(\d+)\.parquet$")
READABLE_VERSIONS = ("2", "3", "4", "5", "6", "7", str(RECORD_VERSION))
"""Record versions this release reads (older parts read with the newer fields null)."""


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part
    (:func:`rehearsal_env._atomic.write_atomic`: a unique temporary file, fsync, rename, fsync of the folder)."""
    write_atomic(path, data)


def encode_part(records: Sequence[EpisodeRecord]) -> bytes:
    """``records`` as the bytes of one part file (a worker encodes; the driver only writes bytes)."""
    table = pa.Table.from_pylist([to_row(r) for r in records], schema=SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def preload() -> None:
    """Import now what writing and reading parts import on first use (pandas, through pyarrow's conversions, and
    ``pyarrow.dataset``, through ``read_table``), so that a long-lived server can freeze them out of the garbage
    collector's walks (``gc.freeze``) before it serves."""
    import pyarrow.dataset  # noqa: F401

    encode_part([])


def write_part(run_dir: str | Path, records: Sequence[EpisodeRecord], part: int) -> Path:
    """Write ``records`` as part ``part`` of the run's episode table, atomically, and enter it in the
    manifest; return its path."""
    return write_part_bytes(run_dir, encode_part(records), part)


def write_part_bytes(run_dir: str | Path, data: bytes, part: int) -> Path:
    """Write an encoded part (:func:`encode_part`) as part ``part``, atomically, and enter it in the manifest."""
    directory = Path(run_dir) / EPISODES_DIR
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"part-{part:05d}.parquet"
    write_bytes_atomic(final, data)
    note_part(final, data)
    return final


def next_part(run_dir: str | Path) -> int:
    """The first part number after every part already in the run directory (0 for a new run)."""
    directory = Path(run_dir) / EPISODES_DIR
    try:
        names = os.listdir(directory)  # not Path.glob: a served run asks at every flush, and glob is slow
    except FileNotFoundError:
        names = []
    numbers = [int(m.group(1)) for name in names if (m := _PART.match(name))]
    return max(numbers, default=-1) + 1


class PartWriter:
    """Writes records as they finish: a part every ``flush_every`` records, and the rest on :meth:`close`.

    Part numbers continue after the parts already in the directory, so a resumed
    run never overwrites what an earlier attempt wrote.
    """

    def __init__(self, run_dir: str | Path, flush_every: int = 1) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be at least 1, got {flush_every}")
        self.run_dir = Path(run_dir)
        self.flush_every = flush_every
        self.parts: list[Path] = []
        self._buffer: list[EpisodeRecord] = []
        self._next = next_part(run_dir)

    def add(self, records: Sequence[EpisodeRecord]) -> None:
        """Buffer finished records; write a part once ``flush_every`` are waiting."""
        self._buffer.extend(records)
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write every buffered record now (no part when none is waiting)."""
        if self._buffer:
            self.parts.append(write_part(self.run_dir, self._buffer, self._next))
            self._next += 1
            self._buffer = []

    def close(self) -> None:
        self.flush()


def part_files(run_dir: str | Path) -> list[Path]:
    """The run's finished part files, in order.

    Raises:
        FileNotFoundError: saying what a run directory holds when there is none.
    """
    directory = Path(run_dir) / EPISODES_DIR
    parts = sorted(p for p in directory.glob("part-*.parquet") if _PART.match(p.name))
    if not parts:
        raise FileNotFoundError(f"expected episode records under {directory} (part-*.parquet); found none. "
                                f"Is {run_dir} a run directory written by `rehearsal run`?")
    return parts


def part_version(path: Path) -> str:
    """The record version a part was written with (``?`` when it says none)."""
    return (pq.read_schema(path).metadata or {}).get(VERSION_KEY.encode(), b"?").decode()


def checked_parts(run_dir: str | Path) -> list[Path]:
    """The run's part files, verified against the manifest (both ways) and carrying one run id; the seal
    is not looked at (the runner reads its own unfinished run with this; readers use :func:`sealed_parts`).

    Raises:
        FileNotFoundError: no part files.
        RecordsDamaged: no manifest; a part missing from disk, truncated, changed, unlisted or not Parquet
            (naming it and the remedy).
        MixedRuns: the parts carry more than one run id (naming them).
    """
    directory = Path(run_dir) / EPISODES_DIR
    if directory.is_dir():
        verify_directory(directory)
    parts = part_files(run_dir)
    for path in parts:
        _readable(path)
    check_one_run(parts)
    return parts


def sealed_parts(run_dir: str | Path, trusted: Mapping[str, PublicKey] | None = None) -> list[Path]:
    """:func:`checked_parts`, and the run sealed by a trusted key (``trusted``, default the home's trusted
    keys) with nothing changed since.

    Raises:
        RunNotSealed: unsealed, sealed by an untrusted key, or changed after sealing (naming what).
        FileNotFoundError, RecordsDamaged, MixedRuns: as :func:`checked_parts`.
    """
    parts = checked_parts(run_dir)
    verify_seal(run_dir, trusted)
    return parts


def _readable(path: Path) -> str:
    version = part_version(path)
    if version not in READABLE_VERSIONS:
        raise ValueError(f"{path}: expected episode records of version {RECORD_VERSION}, found version "
                         f"{version}; rerun to regenerate them, or read them with the rehearsal-env "
                         f"release that wrote them")
    return version


def _read_part(path: Path) -> pa.Table:
    if _readable(path) == str(RECORD_VERSION):
        return pq.read_table(path, schema=SCHEMA)
    table = pq.read_table(path)
    columns = [table.column(f.name) if f.name in table.column_names else pa.nulls(len(table), f.type)
               for f in SCHEMA]
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def read_table(run_dir: str | Path, trusted: Mapping[str, PublicKey] | None = None) -> pa.Table:
    """Every finished record of a run as one Arrow table (:data:`RECORD_VERSION`; version 2 parts read too,
    the newer fields null), after :func:`sealed_parts` (``trusted``: the keys whose seal is accepted).

    Raises:
        ValueError: a part written with a version this release does not read, naming it and what to do;
            or a damaged part or mixed runs (see :func:`checked_parts`).
    """
    return pa.concat_tables([_read_part(path) for path in sealed_parts(run_dir, trusted)])


def verify_run_dir(run_dir: str | Path, trusted: Mapping[str, PublicKey] | None = None) -> list[str]:
    """Every problem of a run directory's records, one line each (empty: the records can be trusted):
    the manifest against the files both ways, record versions, one run id, and the seal."""
    directory = Path(run_dir) / EPISODES_DIR
    damaged = manifest_problems(directory) if directory.is_dir() else {}
    try:
        parts = part_files(run_dir)
    except FileNotFoundError as exc:
        return [f"{path}: {problem}" for path, problem in damaged.items()] or [str(exc)]
    problems = [f"{path}: {problem}" for path, problem in damaged.items()]
    good = [p for p in parts if p not in damaged]
    for path in good:
        version = part_version(path)
        if version not in READABLE_VERSIONS:
            problems.append(f"{path}: written with record version {version}, this release reads "
                            f"{', '.join(READABLE_VERSIONS)}")
    try:
        check_one_run(good)
    except ValueError as exc:
        problems.append(str(exc))
    return problems + seal_problems(run_dir, trusted)


def read_part(path: Path) -> list[EpisodeRecord]:
    """The records of one part file, in file order (not verified: verify the directory first)."""
    return [from_row(EpisodeRecord, row) for row in _read_part(path).to_pylist()]


def read_records(run_dir: str | Path, trusted: Mapping[str, PublicKey] | None = None) -> list[EpisodeRecord]:
    """Every finished episode record of a sealed run (see :func:`read_table`), ordered by (scenario, agent,
    repeat)."""
    records = [from_row(EpisodeRecord, row) for row in read_table(run_dir, trusted).to_pylist()]
    return sorted(records, key=lambda r: (r.scenario, r.agent, r.repeat))
