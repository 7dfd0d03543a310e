"""Any agent, any harness: the episode and the product's tools over MCP, and a model gateway.

- :func:`episode_server` / :func:`episode_runtime`: one scenario as an MCP server (``rehearsal mcp
  --scenario``): the role's tools, one env step per ``tools/call``, recorded like a served episode.
- :func:`product_server`: the product's own tools over MCP (``rehearsal mcp``).
- :func:`serve_stdio`, :func:`http_app`: the SDK's stdio and streamable HTTP transports; :func:`connected`: an
  in-process client session (the handshake wire: one MCP session, one episode).
- :func:`drive`: a minimal harness (a model over an OpenAI-compatible API playing an MCP episode).
- the model gateway (:mod:`rehearsal_env.gateway`) logs each episode's model calls; with its ledger, each
  step reports their tokens.

Needs the ``mcp`` extra (``pip install rehearsal-env[mcp]``): the MCP Python SDK 2.x. Importing this package with
no SDK, or one outside that range, raises an :class:`ImportError` that names the version found and the range wanted.
"""

from ._sdk import RANGE as SDK_RANGE
from ._sdk import SdkMissing, SdkUnsupported, check_sdk

check_sdk()  # before any module that imports the SDK

from ._driver import Played, drive  # noqa: E402
from ._episode import DISCONNECTED, EpisodeSpec, HostedEpisode  # noqa: E402
from ._mcp_episode import EPISODE_URI, LINK_HEADER, POLICIES_URI, PROMPT, EpisodeServerConfig, episode_server  # noqa: E402
from ._mcp_product import MAX_RUN_EPISODES, TOOLS, Product, product_server  # noqa: E402
from ._memory import connected  # noqa: E402
from ._runtime import GATEWAY_FOLDER, EpisodeRuntime, Storage, episode_runtime  # noqa: E402
from ._transport import MCP_PATH, http_app, serve_stdio  # noqa: E402

__all__ = [
    "DISCONNECTED",
    "EPISODE_URI",
    "GATEWAY_FOLDER",
    "LINK_HEADER",
    "MAX_RUN_EPISODES",
    "MCP_PATH",
    "POLICIES_URI",
    "PROMPT",
    "SDK_RANGE",
    "Played",
    "TOOLS",
    "EpisodeRuntime",
    "EpisodeServerConfig",
    "EpisodeSpec",
    "HostedEpisode",
    "Product",
    "SdkMissing",
    "SdkUnsupported",
    "Storage",
    "check_sdk",
    "connected",
    "drive",
    "episode_runtime",
    "episode_server",
    "http_app",
    "product_server",
    "serve_stdio",
]
