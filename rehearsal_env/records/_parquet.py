"""Episode records on disk: a directory ``episodes.parquet/`` of atomically written parts.

Each batch of finished episodes becomes one part file, written to a temporary
name and renamed into place, so a killed run keeps every finished batch and no
half-written file is ever read as a record. ``pyarrow.parquet.read_table`` (and
pandas, and duckdb with ``episodes.parquet/*.parquet``) read the directory as
one table, with no import of ``rehearsal_env``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ._record import RECORD_VERSION, EpisodeRecord

EPISODES_DIR = "episodes.parquet"

_TYPES = {"str": pa.string(), "int": pa.int64(), "bool": pa.bool_(), "float | None": pa.float64(),
          "int | None": pa.int64(), "str | None": pa.string()}

SCHEMA = pa.schema(
    [pa.field(f.name, _TYPES[str(f.type)], nullable=str(f.type).endswith("None")) for f in fields(EpisodeRecord)],
    metadata={"rehearsal.record_version": str(RECORD_VERSION)},
)


def write_part(run_dir: str | Path, records: Sequence[EpisodeRecord], part: int) -> Path:
    """Write ``records`` as part ``part`` of the run's episode table, atomically."""
    directory = Path(run_dir) / EPISODES_DIR
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([r.to_row() for r in records], schema=SCHEMA)
    final = directory / f"part-{part:05d}.parquet"
    tmp = directory / f".part-{part:05d}.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, final)
    return final


def read_records(run_dir: str | Path) -> list[EpisodeRecord]:
    """Every finished episode record of a run, ordered by (scenario, agent, repeat)."""
    directory = Path(run_dir) / EPISODES_DIR
    parts = sorted(directory.glob("part-*.parquet"))
    if not parts:
        raise FileNotFoundError(f"no episode records under {directory}; is {run_dir} a run directory?")
    rows = pa.concat_tables([pq.read_table(p, schema=SCHEMA) for p in parts]).to_pylist()
    records = [EpisodeRecord(**row) for row in rows]
    return sorted(records, key=lambda r: (r.scenario, r.agent, r.repeat))
