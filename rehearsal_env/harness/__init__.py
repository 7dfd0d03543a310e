"""Any agent, any harness: the episode and the product's tools over MCP, and a model gateway.

- :func:`episode_server` / :func:`episode_runtime`: one scenario as an MCP server (``rehearsal mcp
  --scenario``): the role's tools, one env step per ``tools/call``, recorded like a served episode.
- :func:`product_server`: the product's own tools over MCP (``rehearsal mcp``).
- :func:`serve_stdio`, :func:`http_app`: the SDK's stdio and streamable HTTP transports.
- :func:`drive`: a minimal harness (a model over an OpenAI-compatible API playing an MCP episode).
- the model gateway (:mod:`rehearsal_env.gateway`) logs each episode's model calls; with its ledger, each
  step reports their tokens.

Needs the ``mcp`` extra (``pip install rehearsal-env[mcp]``).
"""

from ._driver import Played, drive
from ._episode import DISCONNECTED, EpisodeSpec, HostedEpisode
from ._mcp_episode import EPISODE_URI, LINK_HEADER, POLICIES_URI, PROMPT, EpisodeServerConfig, episode_server
from ._mcp_product import MAX_RUN_EPISODES, TOOLS, Product, product_server
from ._runtime import GATEWAY_FOLDER, EpisodeRuntime, Storage, episode_runtime
from ._transport import MCP_PATH, http_app, serve_stdio

__all__ = [
    "DISCONNECTED",
    "EPISODE_URI",
    "GATEWAY_FOLDER",
    "LINK_HEADER",
    "MAX_RUN_EPISODES",
    "MCP_PATH",
    "POLICIES_URI",
    "PROMPT",
    "Played",
    "TOOLS",
    "EpisodeRuntime",
    "EpisodeServerConfig",
    "EpisodeSpec",
    "HostedEpisode",
    "Product",
    "Storage",
    "drive",
    "episode_runtime",
    "episode_server",
    "http_app",
    "product_server",
    "serve_stdio",
]
