"""An episode as an MCP server: the role's tools, the scenario as a prompt and resources, one step per call.

Built on the official ``mcp`` SDK's low-level :class:`mcp.server.lowlevel.Server` so that each tool's
``inputSchema`` is exactly the world's JSON schema and nothing is validated before the env sees it:

- ``tools/list``: the role's tools (``finish``, ``give_up``, ``ask_customer`` included), in order;
- ``tools/call``: one env step (:meth:`~._episode.HostedEpisode.call`); arguments that do not fit the
  schema, or a tool the role lacks, is a rejected attempt (``isError`` true, the episode goes on).
  The text content is the env's observation, exactly what an in-process agent reads; the call that
  ends the episode adds a second text block with the verdict and reward; ``structuredContent``
  holds all of it with the episode id, turn and caveats;
- a second ``tools/call`` while one is running is refused with a JSON-RPC error (``-32600``), not
  carried out and not a turn; malformed JSON-RPC gets the SDK's protocol errors;
- ``prompts``: ``scenario``, the system prompt (role, policies) and the customer's request;
- ``resources``: ``rehearsal://episode`` (the episode as it stands: opening, turns taken, verdict once
  ended) and ``rehearsal://policies``; a URI this server does not have is ``-32002`` (resource not found; ``-32602``
  on the 2026-07-28 wire, SEP-2164), and there are no resource templates.
  ``resources/subscribe`` to ``rehearsal://episode`` sends ``notifications/resources/updated`` after every
  step; a subscription to any other URI is accepted and tracked, but nothing else here ever changes;
- ``logging``: when the episode ends, an ``info`` message with its outcome, reward and run directory
  (``logging/setLevel`` above ``info`` silences it).

One episode per MCP session (a connection of the initialize handshake: stdio, or a streamable HTTP session):
started at the session's first request that needs it, settled when the session closes (``gave_up``: the harness
disconnected) or when it has been idle for the idle timeout. A request of the stateless 2026-07-28 wire has no
session to hold an episode: it lists the tools, prompts and resources and reads the policies, and a request that
needs the episode (``tools/call``, ``prompts/get``, reading ``rehearsal://episode``) is answered with what to do
instead (connect with the initialize handshake), nothing carried out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from .._version import __version__
from ..episodes import Principal, SessionTable
from ..gateway import Ledger
from ..integrations import system_prompt
from ._episode import EpisodeSpec, HostedEpisode
from ._transport import principal_of

LINK_HEADER = "x-rehearsal-link"
"""The HTTP header (or ``?link=`` query parameter) that names an episode's gateway link over streamable HTTP."""
EPISODE_URI = "rehearsal://episode"
POLICIES_URI = "rehearsal://policies"
PROMPT = "scenario"
RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC error code for a resource the server does not have on the handshake wire (through 2025-11-25); the
2026-07-28 wire uses -32602, invalid params (SEP-2164)."""
T = TypeVar("T")

# Logging (logging/setLevel, notifications/message) is deprecated from the 2026-07-28 revision on (SEP-2577); the
# handshake wire, where episodes live, keeps it, so the SDK's warning about our use of it is not for our users.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, module=__name__)


@dataclass(frozen=True)
class EpisodeServerConfig:
    """How ``rehearsal mcp --scenario`` hosts episodes."""

    spec: EpisodeSpec
    """The episode every session plays."""
    who: Principal
    """Who starts the episodes over stdio (the key's id and scope; ``local`` without a key). Over HTTP each request's
    own authenticated principal starts and owns its session's episode."""
    idle_timeout: float = 300.0
    """Seconds without a call after which a running episode is settled as given up."""
    ledger: Ledger | None = None
    """The gateway's ledger, whose calls are reported as the episode's tokens (None: no gateway)."""
    link: str | None = None
    """The gateway link of a stdio session's episode (default: a fresh random secret, shown in its opening)."""


MAX_SUBSCRIPTIONS = 32
"""Resource subscriptions one session may hold."""
MAX_URI_CHARS = 2048
"""The longest URI a subscription keeps."""

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels, least severe first."""


class _Slot:
    """The episode of one MCP session (created at its first request that needs one)."""

    def __init__(self) -> None:
        self.episode: HostedEpisode | None = None
        self.busy = False
        self.creating = asyncio.Lock()
        self.log_level = "info"
        """The least severe level the client gets as ``notifications/message`` (``logging/setLevel``)."""
        self.subscribed: set[str] = set()
        """URIs the client subscribed to (``resources/subscribe``)."""


class _Live:
    """The server's sessions with a slot (the lifespan's state: one per stdio process, one per HTTP server)."""

    def __init__(self) -> None:
        self.slots: set[_Slot] = set()


SLOT_KEY = "rehearsal_slot"
"""The key of a session's :class:`_Slot` in the SDK's per-connection state."""
STATELESS = ("this episode server keeps one episode per MCP session, and a request of the stateless {version} wire "
             "has none: connect with the initialize handshake (protocol 2025-11-25; the SDK's ClientSession, or "
             "Client(mode='legacy')) and send this request in that session (nothing was carried out)")


def _connection(ctx: Any) -> Any:
    """The SDK's per-connection object of a request (its ``state`` and ``exit_stack`` outlive the request).

    The low-level context exposes it only on its session (``ServerSession._connection``, SDK 2.x)."""
    return ctx.session._connection


def _stateless(ctx: Any) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _link_of(request: Any) -> str | None:
    if request is None:
        return None
    headers, query = getattr(request, "headers", None), getattr(request, "query_params", None)
    return (headers.get(LINK_HEADER) if headers is not None else None) or (
        query.get("link") if query is not None else None)


def episode_server(config: EpisodeServerConfig, table: SessionTable,
                   on_end: Callable[[HostedEpisode], None] | None = None) -> Server[Any]:
    """The MCP server of ``config``'s episode; sessions' episodes live in ``table``.

    ``on_end(episode)`` runs (in a worker thread) after each episode ends, e.g. to flush the recorder."""
    spec = config.spec
    tools = spec.world.tools_for(spec.scenario.role, offers_retry=spec.scenario.offers_retry)
    listed = [types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters))
              for t in tools.values()]
    prompt_text = system_prompt(spec.world, spec.scenario)

    async def off_loop(fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(partial(fn, *args))

    async def settle(slot: _Slot, reason: str) -> None:
        ep = slot.episode
        if ep is not None and not ep.ended:
            await off_loop(ep.settle, reason)
            if on_end is not None:
                await off_loop(on_end, ep)

    async def reaper(live: _Live) -> None:
        every = min(1.0, config.idle_timeout / 4)
        while True:
            await asyncio.sleep(every)
            for slot in list(live.slots):
                ep = slot.episode
                if ep is not None and not ep.ended and not slot.busy and (
                        time.monotonic() - ep.session.last_used > config.idle_timeout):
                    await settle(slot, "idle_timeout")

    @contextlib.asynccontextmanager
    async def lifespan(server: Server[Any]) -> AsyncIterator[_Live]:
        live = _Live()
        task = asyncio.create_task(reaper(live))
        try:
            yield live
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with anyio.CancelScope(shield=True):
                for slot in list(live.slots):
                    await settle(slot, "disconnect")

    def slot_of(ctx: Any) -> _Slot:
        """The session's slot, made at its first request; settled when the SDK closes the connection."""
        connection = _connection(ctx)
        slot: _Slot | None = connection.state.get(SLOT_KEY)
        if slot is None:
            live: _Live = ctx.lifespan_context
            slot = connection.state[SLOT_KEY] = _Slot()
            live.slots.add(slot)

            async def closed() -> None:
                live.slots.discard(slot)
                await settle(slot, "disconnect")

            connection.exit_stack.push_async_callback(closed)
        return slot

    async def episode(ctx: Any) -> HostedEpisode:
        """The session's episode, started for the caller at its first request that needs it; a request of another
        caller (over HTTP: another key) is refused, and so is a stateless request (it has no session)."""
        if _stateless(ctx):
            raise MCPError(types.INVALID_REQUEST, STATELESS.format(version=ctx.protocol_version))
        slot = slot_of(ctx)
        who = principal_of(ctx.request) or config.who
        async with slot.creating:
            if slot.episode is None:
                if who.agents and spec.agent not in who.agents:
                    raise MCPError(types.INVALID_REQUEST, (
                        f"this key (id {who.key_id}) plays only as agent(s) {', '.join(who.agents)}; this server "
                        f"records its episodes as agent {spec.agent!r}. Start it with --agent set to one of those "
                        f"names, or use a key made for this agent"))
                link = _link_of(ctx.request) or config.link
                slot.episode = await off_loop(
                    partial(HostedEpisode, table, who, spec, ledger=config.ledger, link=link))
        if slot.episode.who.key_id != who.key_id:
            raise MCPError(types.INVALID_REQUEST,
                           f"episode {slot.episode.id} belongs to another key; only its owner may play or read it")
        return slot.episode

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        if not _stateless(ctx):
            await episode(ctx)
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if _stateless(ctx):  # a tool result, so that a harness's model reads why nothing happened
            known = "" if params.name in tools else f"this role has no tool {params.name[:80]!r}; and "
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=known + STATELESS.format(version=ctx.protocol_version))], is_error=True)
        ep = await episode(ctx)
        slot = slot_of(ctx)
        if slot.busy:
            raise MCPError(types.INVALID_REQUEST,
                           f"a tools/call is already running for episode {ep.id}; send one tools/call at a time and "
                           f"wait for its result (this call was not carried out and took no turn)")
        slot.busy = True
        try:
            out = await off_loop(ep.call, params.name, params.arguments or {})
        finally:
            slot.busy = False
        if EPISODE_URI in slot.subscribed:
            await ctx.session.send_resource_updated(EPISODE_URI)
        if out.get("ended"):
            if on_end is not None:
                await off_loop(on_end, ep)
            if LEVELS.index(slot.log_level) <= LEVELS.index("info"):
                await ctx.session.send_log_message(
                    level="info", logger="rehearsal", related_request_id=ctx.request_id,
                    data={"episode_id": ep.id, "ended_by": out.get("ended_by"), "run_dir": out.get("run_dir"),
                          "outcome": (out.get("verdict") or {}).get("outcome"), "reward": out.get("reward")})
        structured = json.loads(json.dumps(out, sort_keys=True, default=str))
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=json.dumps(out.get("observation") or {
            "status": out["status"], "error": out.get("error")}, sort_keys=True))]
        if out.get("ended"):
            content.append(types.TextContent(type="text", text=json.dumps(
                {k: structured.get(k) for k in ("episode_id", "ended_by", "verdict", "reward", "run_dir")},
                sort_keys=True)))
        return types.CallToolResult(content=content, structured_content=structured,
                                    is_error=out["status"] in ("rejected", "error", "not_run"))

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        slot_of(ctx).log_level = params.level
        return types.EmptyResult()

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(
            name=PROMPT, title=f"{spec.world.name}/{spec.scenario.id}",
            description="The scenario: the role, the policies and the customer's request")])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != PROMPT:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name[:80]!r}; this server has {PROMPT!r}")
        ep = await episode(ctx)
        request = "\n\n".join(str(m) for m in ep.opening()["observation"].get("messages") or ())
        return types.GetPromptResult(description=f"{spec.world.name}/{spec.scenario.id}", messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=prompt_text)),
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=request))])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        policies = types.Resource(uri=POLICIES_URI, name="policies", mime_type="text/plain",
                                  description="The world's policies the agent must follow")
        if _stateless(ctx):  # no session, no episode to read
            return types.ListResourcesResult(resources=[policies])
        return types.ListResourcesResult(resources=[
            types.Resource(uri=EPISODE_URI, name="episode", mime_type="application/json",
                           description="The episode: its id, the customer's request, the verdict once ended"),
            policies])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[])  # every resource here has a fixed URI

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == POLICIES_URI:
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="\n".join(f"- {p.text}" for p in spec.world.policies))])
        if uri != EPISODE_URI:
            code = types.INVALID_PARAMS if _stateless(ctx) else RESOURCE_NOT_FOUND  # SEP-2164 from 2026-07-28 on
            raise MCPError(code, f"resource not found: {uri[:120]!r}; this server has {EPISODE_URI} and "
                                 f"{POLICIES_URI}", {"uri": uri[:MAX_URI_CHARS]})
        ep = await episode(ctx)
        body = ep.opening()
        body.update(turns=ep.session.steps, ended=ep.ended)
        if ep.ended:
            body.update(ep.ending())
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="application/json", text=json.dumps(body, sort_keys=True, default=str))])

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        slot = slot_of(ctx)
        uri = str(params.uri)[:MAX_URI_CHARS]
        if len(slot.subscribed) >= MAX_SUBSCRIPTIONS and uri not in slot.subscribed:
            raise MCPError(types.INVALID_PARAMS, f"at most {MAX_SUBSCRIPTIONS} subscriptions per session; "
                                                 "unsubscribe from one first")
        slot.subscribed.add(uri)
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        slot_of(ctx).subscribed.discard(str(params.uri)[:MAX_URI_CHARS])
        return types.EmptyResult()

    return Server(
        "rehearsal-env", version=__version__, instructions=prompt_text, lifespan=lifespan,
        on_list_tools=list_tools, on_call_tool=call_tool, on_set_logging_level=set_level,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource, on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe)
