"""Episode records: one flat row per episode, stored as Parquet parts in the run directory."""

from ._parquet import EPISODES_DIR, SCHEMA, read_records, write_part
from ._record import RECORD_VERSION, EpisodeRecord, record_episode

__all__ = ["EPISODES_DIR", "RECORD_VERSION", "SCHEMA", "EpisodeRecord", "read_records", "record_episode", "write_part"]
