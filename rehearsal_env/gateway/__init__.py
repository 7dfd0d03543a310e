"""The model gateway: an OpenAI-compatible endpoint between a harness and its model (``rehearsal gateway``).

The harness's model calls go through it with the episode's link in the path (``/episodes/LINK/v1``)
or a header; each is forwarded to the real provider, streamed back, and logged in a
:class:`Ledger` (usage, latency, logprobs and token ids where the provider returns them). The
episode's MCP server (``rehearsal mcp --ledger``) reports the logged tokens with each step, so an
episode played through the gateway has measured tokens: no external-mode caveat, efficiency scored.
An ended episode's calls are kept beside its records (:func:`keep_calls`, :func:`read_kept`), with which step
reported which call, for trajectories with the engine's tokens (:mod:`rehearsal_env.trajectories`).
"""

from ._app import LINK_HEADER, MAX_BODY, GatewayConfig, gateway_app
from ._call import RETRY_STATUSES, TOKEN_FIELDS, Call, status_of
from ._kept import KEPT_FOLDER, MAX_KEPT_BYTES, KeptCalls, keep_calls, read_kept
from ._ledger import HARNESS_CLOSED, LINK, OK, PROVIDER_FAILED, REFUSED, Ledger, Tally, check_link

__all__ = [
    "HARNESS_CLOSED",
    "KEPT_FOLDER",
    "LINK",
    "LINK_HEADER",
    "MAX_BODY",
    "MAX_KEPT_BYTES",
    "OK",
    "PROVIDER_FAILED",
    "REFUSED",
    "RETRY_STATUSES",
    "TOKEN_FIELDS",
    "Call",
    "GatewayConfig",
    "KeptCalls",
    "Ledger",
    "Tally",
    "check_link",
    "gateway_app",
    "keep_calls",
    "read_kept",
    "status_of",
]
