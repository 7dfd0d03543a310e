"""Episode records: one row per episode with nested turns, checks, requests and database changes,
stored as atomically written Parquet parts in ``RUN_DIR/episodes.parquet/``, listed in a manifest
and sealed (signed) by whoever ran the evaluation (:func:`seal_run`; readers check it).

The schema is :data:`SCHEMA` (version :data:`RECORD_VERSION`), derived from
:class:`EpisodeRecord`; :func:`schema_text` prints it with every field's doc.
"""

from ._capture import as_json, not_played_record, record_episode
from ._facts import FileKey, file_key
from ._inputs import inputs_from_record
from ._manifest import MixedRuns, RecordsDamaged, damaged_parts, forget_parts, manifest_problems
from ._manifest_log import LEGACY_MANIFEST, MANIFEST, ManifestState, manifest_state, manifest_state_since
from ._parquet import (
    EPISODES_DIR,
    SCHEMA,
    VERSION_KEY,
    PartWriter,
    checked_parts,
    encode_part,
    next_part,
    part_files,
    part_version,
    preload,
    read_part,
    read_records,
    read_table,
    sealed_parts,
    verify_run_dir,
    write_bytes_atomic,
    write_part,
    write_part_bytes,
)
from ._record import (
    RECORD_VERSION,
    CheckRecord,
    EpisodeRecord,
    RewardComponent,
    RowChange,
    ServiceRequest,
    ToolCrashRecord,
    Turn,
)
from ._schema import describe, from_row, to_row
from ._seal import SEAL_FILE, RunNotSealed, Seal, seal_problems, seal_run, unseal, verify_seal
from ._signing import (
    DISTRUSTED_ENTIRELY,
    PublicKey,
    SigningKeyError,
    create_signing_key,
    load_signing_key,
    parse_time,
    public_text,
    show_time,
    signing_key_path,
)
from ._trust import (
    distrust_key,
    home_keys,
    rotate_signing_key,
    trust_key,
    trusted_keys,
    untrust_key,
)


def schema_text() -> str:
    """The record schema as text: every field, its Arrow type and its doc, nested fields indented."""
    return f"episode record, version {RECORD_VERSION}\n" + "\n".join(describe(EpisodeRecord))


__all__ = [
    "DISTRUSTED_ENTIRELY",
    "EPISODES_DIR",
    "LEGACY_MANIFEST",
    "MANIFEST",
    "ManifestState",
    "RECORD_VERSION",
    "SCHEMA",
    "SEAL_FILE",
    "VERSION_KEY",
    "CheckRecord",
    "MixedRuns",
    "PublicKey",
    "RecordsDamaged",
    "RunNotSealed",
    "Seal",
    "SigningKeyError",
    "EpisodeRecord",
    "FileKey",
    "PartWriter",
    "RewardComponent",
    "RowChange",
    "ServiceRequest",
    "ToolCrashRecord",
    "Turn",
    "as_json",
    "checked_parts",
    "create_signing_key",
    "damaged_parts",
    "distrust_key",
    "file_key",
    "describe",
    "encode_part",
    "preload",
    "forget_parts",
    "load_signing_key",
    "manifest_problems",
    "manifest_state",
    "manifest_state_since",
    "from_row",
    "home_keys",
    "inputs_from_record",
    "next_part",
    "not_played_record",
    "parse_time",
    "part_files",
    "part_version",
    "public_text",
    "read_part",
    "read_records",
    "read_table",
    "record_episode",
    "rotate_signing_key",
    "schema_text",
    "seal_problems",
    "seal_run",
    "sealed_parts",
    "show_time",
    "signing_key_path",
    "to_row",
    "trust_key",
    "trusted_keys",
    "unseal",
    "untrust_key",
    "verify_run_dir",
    "verify_seal",
    "write_bytes_atomic",
    "write_part",
    "write_part_bytes",
]
