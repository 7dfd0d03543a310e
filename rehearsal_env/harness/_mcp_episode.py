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
  ended) and ``rehearsal://policies``; a URI this server does not have is ``-32002`` (resource not found).
  ``resources/subscribe`` to ``rehearsal://episode`` sends ``notifications/resources/updated`` after every
  step; a subscription to any other URI is accepted and tracked, but nothing else here ever changes;
- ``logging``: when the episode ends, an ``info`` message with its outcome, reward and run directory
  (``logging/setLevel`` above ``info`` silences it).

One episode per MCP session: started at the session's first request, settled when the session closes
(``gave_up``: the harness disconnected) or when it has been idle for the idle timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError

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
"""The MCP spec's JSON-RPC error code for a resource the server does not have."""
T = TypeVar("T")


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
    """The episode of one MCP session (created at its first request)."""

    def __init__(self) -> None:
        self.episode: HostedEpisode | None = None
        self.busy = False
        self.creating = asyncio.Lock()
        self.log_level = "info"
        """The least severe level the client gets as ``notifications/message`` (``logging/setLevel``)."""
        self.subscribed: set[str] = set()
        """URIs the client subscribed to (``resources/subscribe``)."""


class _Server(Server[Any, Any]):
    """The SDK's low-level server, declaring resource subscriptions (the SDK 1.x always declares none)."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        if capabilities.resources is not None:
            capabilities.resources.subscribe = True
        return capabilities


def _link_of(request: Any) -> str | None:
    if request is None:
        return None
    headers, query = getattr(request, "headers", None), getattr(request, "query_params", None)
    return (headers.get(LINK_HEADER) if headers is not None else None) or (
        query.get("link") if query is not None else None)


def episode_server(config: EpisodeServerConfig, table: SessionTable,
                   on_end: Callable[[HostedEpisode], None] | None = None) -> Server[Any, Any]:
    """The MCP server of ``config``'s episode; sessions' episodes live in ``table``.

    ``on_end(episode)`` runs (in a worker thread) after each episode ends, e.g. to flush the recorder."""
    spec = config.spec
    tools = spec.world.tools_for(spec.scenario.role, offers_retry=spec.scenario.offers_retry)
    listed = [types.Tool(name=t.name, description=t.description, inputSchema=dict(t.parameters))
              for t in tools.values()]
    prompt_text = system_prompt(spec.world, spec.scenario)

    async def off_loop(fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(partial(fn, *args))

    async def reaper(slot: _Slot) -> None:
        every = min(1.0, config.idle_timeout / 4)
        while True:
            await asyncio.sleep(every)
            ep = slot.episode
            if ep is None or ep.ended:
                continue
            if not slot.busy and time.monotonic() - ep.session.last_used > config.idle_timeout:
                await off_loop(ep.settle, "idle_timeout")
                if on_end is not None:
                    await off_loop(on_end, ep)

    @contextlib.asynccontextmanager
    async def lifespan(server: Server[Any, Any]) -> AsyncIterator[_Slot]:
        slot = _Slot()
        task = asyncio.create_task(reaper(slot))
        try:
            yield slot
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            ep = slot.episode
            if ep is not None and not ep.ended:
                with anyio.CancelScope(shield=True):
                    await off_loop(ep.settle, "disconnect")
                    if on_end is not None:
                        await off_loop(on_end, ep)

    server: Server[Any, Any] = _Server("rehearsal-env", version=__version__, instructions=prompt_text,
                                       lifespan=lifespan)

    async def episode() -> HostedEpisode:
        """The session's episode, started for the caller at its first request; a request of another caller (over
        HTTP: another key) is refused."""
        ctx = server.request_context
        slot: _Slot = ctx.lifespan_context
        who = principal_of(ctx.request) or config.who
        async with slot.creating:
            if slot.episode is None:
                if who.agents and spec.agent not in who.agents:
                    raise McpError(types.ErrorData(code=types.INVALID_REQUEST, message=(
                        f"this key (id {who.key_id}) plays only as agent(s) {', '.join(who.agents)}; this server "
                        f"records its episodes as agent {spec.agent!r}. Start it with --agent set to one of those "
                        f"names, or use a key made for this agent")))
                link = _link_of(ctx.request) or config.link
                slot.episode = await off_loop(
                    partial(HostedEpisode, table, who, spec, ledger=config.ledger, link=link))
        if slot.episode.who.key_id != who.key_id:
            raise McpError(types.ErrorData(code=types.INVALID_REQUEST, message=(
                f"episode {slot.episode.id} belongs to another key; only its owner may play or read it")))
        return slot.episode

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        await episode()
        return listed

    async def call_tool(req: types.CallToolRequest) -> types.ServerResult:
        ep = await episode()
        slot: _Slot = server.request_context.lifespan_context
        if slot.busy:
            raise McpError(types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"a tools/call is already running for episode {ep.id}; send one tools/call at a time and "
                        f"wait for its result (this call was not carried out and took no turn)"))
        slot.busy = True
        try:
            out = await off_loop(ep.call, req.params.name, req.params.arguments or {})
        finally:
            slot.busy = False
        if EPISODE_URI in slot.subscribed:
            await server.request_context.session.send_resource_updated(EPISODE_URI)  # type: ignore[arg-type]
        if out.get("ended"):
            if on_end is not None:
                await off_loop(on_end, ep)
            if LEVELS.index(slot.log_level) <= LEVELS.index("info"):
                await server.request_context.session.send_log_message(
                    level="info", logger="rehearsal", related_request_id=server.request_context.request_id,
                    data={"episode_id": ep.id, "ended_by": out.get("ended_by"), "run_dir": out.get("run_dir"),
                          "outcome": (out.get("verdict") or {}).get("outcome"), "reward": out.get("reward")})
        structured = json.loads(json.dumps(out, sort_keys=True, default=str))
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=json.dumps(out.get("observation") or {
            "status": out["status"], "error": out.get("error")}, sort_keys=True))]
        if out.get("ended"):
            content.append(types.TextContent(type="text", text=json.dumps(
                {k: structured.get(k) for k in ("episode_id", "ended_by", "verdict", "reward", "run_dir")},
                sort_keys=True)))
        return types.ServerResult(types.CallToolResult(
            content=content, structuredContent=structured, isError=out["status"] in ("rejected", "error", "not_run")))

    server.request_handlers[types.CallToolRequest] = call_tool

    @server.set_logging_level()
    async def set_level(level: types.LoggingLevel) -> None:
        slot: _Slot = server.request_context.lifespan_context
        slot.log_level = level

    @server.list_prompts()
    async def list_prompts() -> list[types.Prompt]:
        return [types.Prompt(name=PROMPT, title=f"{spec.world.name}/{spec.scenario.id}",
                             description="The scenario: the role, the policies and the customer's request")]

    @server.get_prompt()
    async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != PROMPT:
            raise McpError(types.ErrorData(code=types.INVALID_PARAMS,
                                           message=f"unknown prompt {name[:80]!r}; this server has {PROMPT!r}"))
        ep = await episode()
        request = "\n\n".join(str(m) for m in ep.opening()["observation"].get("messages") or ())
        return types.GetPromptResult(description=f"{spec.world.name}/{spec.scenario.id}", messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=prompt_text)),
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=request))])

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        return [types.Resource(uri=EPISODE_URI, name="episode", mimeType="application/json",  # type: ignore[arg-type]
                               description="The episode: its id, the customer's request, the verdict once ended"),
                types.Resource(uri=POLICIES_URI, name="policies", mimeType="text/plain",  # type: ignore[arg-type]
                               description="The world's policies the agent must follow")]

    @server.read_resource()
    async def read_resource(uri: Any) -> str:
        if str(uri) == POLICIES_URI:
            return "\n".join(f"- {p.text}" for p in spec.world.policies)
        if str(uri) != EPISODE_URI:
            raise McpError(types.ErrorData(code=RESOURCE_NOT_FOUND, message=f"resource not found: "
                                           f"{str(uri)[:120]!r}; this server has {EPISODE_URI} and {POLICIES_URI}"))
        ep = await episode()
        body = ep.opening()
        body.update(turns=ep.session.steps, ended=ep.ended)
        if ep.ended:
            body.update(ep.ending())
        return json.dumps(body, sort_keys=True, default=str)

    @server.subscribe_resource()
    async def subscribe(uri: Any) -> None:
        slot: _Slot = server.request_context.lifespan_context
        if len(slot.subscribed) >= MAX_SUBSCRIPTIONS and str(uri) not in slot.subscribed:
            raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"at most {MAX_SUBSCRIPTIONS} "
                                           "subscriptions per session; unsubscribe from one first"))
        slot.subscribed.add(str(uri)[:MAX_URI_CHARS])

    @server.unsubscribe_resource()
    async def unsubscribe(uri: Any) -> None:
        slot: _Slot = server.request_context.lifespan_context
        slot.subscribed.discard(str(uri)[:MAX_URI_CHARS])

    return server
