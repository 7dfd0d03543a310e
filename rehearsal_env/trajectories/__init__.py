"""Episode records in other trajectory formats: ATIF (the Agent Trajectory Interchange Format, v1.8), with the
``atif`` package's models (``pip install rehearsal-env[atif]``); ``rehearsal eval export --format atif``."""

from ._atif import SCHEMA_VERSION, WITHHELD, file_name, to_record, to_trajectory, validate

__all__ = ["SCHEMA_VERSION", "WITHHELD", "file_name", "to_record", "to_trajectory", "validate"]
