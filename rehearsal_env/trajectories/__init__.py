"""Episode records in other trajectory formats: ATIF (the Agent Trajectory Interchange Format, v1.8), with the
``atif`` package's models (``pip install rehearsal-env[atif]``); ``rehearsal eval export --format atif``.

With the engine's tokens: the model calls the gateway kept for an episode (:func:`gateway_calls`) or an in-process
policy's own (:class:`ModelCall`) go into each turn's step (prompt and completion token ids, logprobs), and
:func:`check_boundaries` checks that each call's prompt continues the previous call's prompt and completion token
for token (no re-tokenization drift)."""

from ._atif import SCHEMA_VERSION, WITHHELD, file_name, to_record, to_trajectory, validate
from ._boundaries import DRIFT, EXACT, UNCHECKED, BoundaryReport, Drift, check_boundaries
from ._calls import MAX_TOKEN_ID, ModelCall, call_from_line, gateway_calls

__all__ = [
    "DRIFT",
    "EXACT",
    "MAX_TOKEN_ID",
    "SCHEMA_VERSION",
    "UNCHECKED",
    "WITHHELD",
    "BoundaryReport",
    "Drift",
    "ModelCall",
    "call_from_line",
    "check_boundaries",
    "file_name",
    "gateway_calls",
    "to_record",
    "to_trajectory",
    "validate",
]
