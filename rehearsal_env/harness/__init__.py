"""Any agent, any harness: the episode and the product's tools over MCP, and a model gateway.

- :func:`episode_server` / :func:`episode_runtime`: one scenario as an MCP server (``rehearsal mcp
  --scenario``): the role's tools, one env step per ``tools/call``, recorded like a served episode.
- :func:`product_server`: the product's own tools over MCP (``rehearsal mcp``).
- :func:`serve_stdio`, :func:`http_app`: the SDK's stdio and streamable HTTP transports.
- :class:`Ledger`: the model gateway's per-episode call log, read back as the episode's tokens.

Needs the ``mcp`` extra (``pip install rehearsal-env[mcp]``).
"""

from ._episode import DISCONNECTED, EpisodeSpec, EpisodeTable, HostedEpisode
from ._ledger import LINK, OK, PROVIDER_FAILED, REFUSED, Ledger, Tally, check_link
from ._mcp_episode import EPISODE_URI, LINK_HEADER, POLICIES_URI, PROMPT, EpisodeServerConfig, episode_server
from ._mcp_product import MAX_RUN_EPISODES, TOOLS, Product, product_server
from ._runtime import GATEWAY_FOLDER, EpisodeRuntime, Storage, episode_runtime
from ._transport import MCP_PATH, http_app, serve_stdio

__all__ = [
    "DISCONNECTED",
    "EPISODE_URI",
    "GATEWAY_FOLDER",
    "LINK",
    "LINK_HEADER",
    "MAX_RUN_EPISODES",
    "MCP_PATH",
    "OK",
    "POLICIES_URI",
    "PROMPT",
    "PROVIDER_FAILED",
    "REFUSED",
    "TOOLS",
    "EpisodeRuntime",
    "EpisodeServerConfig",
    "EpisodeSpec",
    "EpisodeTable",
    "HostedEpisode",
    "Ledger",
    "Product",
    "Storage",
    "Tally",
    "check_link",
    "episode_runtime",
    "episode_server",
    "http_app",
    "product_server",
    "serve_stdio",
]
