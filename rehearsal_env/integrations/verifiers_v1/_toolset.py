"""One episode as a verifiers v1 MCP toolset: the role's tools, one env step per call, recorded like a served episode.

verifiers v1 starts a task's toolsets once per rollout, each an MCP server in its own process
(``python -m rehearsal_env.integrations.verifiers_v1._toolset``), and hands their URLs to the harness.
:class:`RehearsalToolset` is that server for one episode:

- ``setup_task`` starts the task's scenario on a session of :class:`~rehearsal_env.serve.SessionTable`
  (the served-episode path: reset, step contract, recorder), so the episode is recorded into
  ``OUT/<world>-<profile>/`` (Parquet parts, summary, seal) like an episode served over the HTTP API;
- ``tools/list`` is exactly the role's tools (``finish``, ``give_up``, ``ask_customer`` included), each
  ``inputSchema`` the world's own JSON schema, advertised bare (no server prefix);
- ``tools/call`` is one env step. Nothing is validated before the env sees it: a tool the role lacks, or
  arguments that do not fit, is a rejected attempt (``isError``, a turn taken, the episode goes on). The
  text is the tool result as the ``openai`` agent shows it (status, result or error, ``turns_left``) with
  the customer's messages that arrived during the step. Calls are carried out one at a time;
- the model's tokens are measured: the task tallies the usage of every model call verifiers' interception
  server relays into the state, and each step reports the tokens of the calls since the last step
  (``"usage": {"tokens": N}``, as the ``openai`` agent and the gateway do), so the episode has no
  external-mode caveat and its efficiency is scored (a provider that reports no usage leaves it unmeasured);
- after every call the rollout's :class:`RehearsalState` (episode id, turns, and once ended the verdict,
  reward and run directory) goes back to the host over verifiers' state channel, where the task's reward
  and stop condition read it;
- when the rollout ends with the episode still running (the model stopped calling tools, a timeout), the
  server's shutdown settles it with ``give_up`` (:data:`~rehearsal_env.integrations.STOPPED_REASON`),
  records it and sends the final state, as the TRL and legacy verifiers adapters do.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from typing import Any

import verifiers.v1 as vf
from mcp.types import CallToolResult, Tool
from pydantic import Field

from ...episodes import Principal, Recorder, Scope, Session, SessionTable, ending_view
from ...worlds import load_world
from .._prompt import STOPPED_REASON, tool_text

AGENT = "verifiers-v1"
"""The agent name on the records unless the config names another."""


class RehearsalToolsetConfig(vf.ToolsetConfig):  # type: ignore[misc]
    """Where and how the rollouts' episodes run and are recorded (``--env.taskset.task.tools.*``)."""

    out: str = "runs/verifiers"
    """Recorded into ``OUT/<world>-<profile>/`` run directories, like served episodes."""
    reward_profile: str | None = "rl"
    """The reward profile of the episode's reward (None: the outcome reward, 1 / 0 / -1)."""
    backend: str = "sqlite"
    """sqlite or postgres."""
    backend_options: dict[str, Any] = Field(default_factory=dict)
    """Backend options (PostgreSQL: ``dsn``)."""
    stress: bool = True
    """Whether the stress layer is on."""
    agent: str = AGENT
    """The agent's name on the records."""
    agent_version: str = "unversioned"
    """The agent's version on the records."""


class RehearsalState(vf.State):  # type: ignore[misc]
    """The episode as the host sees it, synced after every tool call."""

    episode_id: str | None = None
    """The served session's id (None until the tool server started the episode)."""
    turns: int = 0
    """Turns taken."""
    ended: bool = False
    """Whether the episode has ended."""
    ended_by: str | None = None
    """``agent`` (an ending tool or the turn limit) or ``stopped`` (settled when the rollout ended)."""
    verdict: dict[str, Any] | None = None
    """The verdict as the served API shows it (no checks of a holdout scenario)."""
    reward: float | None = None
    """The reward under the profile (None: not scored)."""
    reward_detail: dict[str, Any] | None = None
    """The reward's components."""
    run_dir: str | None = None
    """The run directory the episode was recorded in."""
    caveats: list[str] = Field(default_factory=list)
    """What the record says the score cannot show (e.g. tokens not measured)."""
    model_calls: int = 0
    """Model calls the host has seen (written by the task, on the host)."""
    unmeasured_calls: int = 0
    """Of those, calls whose response carried no usage."""
    model_tokens: int = 0
    """Tokens of the calls with usage (prompt, cached prompt and completion)."""
    reported_measured: int = 0
    """Calls with usage already reported with a step (written by the tool server)."""
    reported_tokens: int = 0
    """Tokens already reported with a step."""


def _result(text: str, is_error: bool) -> CallToolResult:
    return CallToolResult.model_validate({"content": [{"type": "text", "text": text}], "isError": is_error})


def _stop_after_shutdown(signum: int, frame: Any) -> None:
    """SIGTERM's handler once uvicorn has shut down gracefully: return, so the server's exit stack (the settle) runs.

    uvicorn re-raises the SIGTERM it caught once it has stopped serving; under the default handler that kills the
    process before verifiers' ``ServerBase`` unwinds its exit stack, and an episode left running would be lost."""


class RehearsalToolset(vf.Toolset[RehearsalToolsetConfig, RehearsalState]):  # type: ignore[misc]
    """The MCP server of one rollout's episode (see the module doc)."""

    TOOL_PREFIX = None  # the world's tool names, bare: the scenario's policies and the model name them so

    async def setup(self) -> None:
        cfg = self.config
        self.recorder = Recorder(cfg.out, backend=cfg.backend, stress=cfg.stress, flush_every=1)
        self.table = SessionTable(backend=cfg.backend, backend_options=cfg.backend_options, stress=cfg.stress,
                                  max_sessions=1, idle_timeout=10 ** 9, recorder=self.recorder)
        self.who = Principal("local", Scope.BUILD_AND_EVALUATE)
        self.session: Session | None = None
        self.listed: list[Tool] = []
        self.lock = asyncio.Lock()
        self._exit_stack.push_async_callback(self._shutdown)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _stop_after_shutdown)

    async def setup_task(self, task: Any) -> None:
        world = load_world(task.world)
        scenario = world.scenario(task.scenario)
        tools = world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
        # built from the wire form (camelCase), which mcp 1.x and 2.x (snake_case attributes) both read
        self.listed = [Tool.model_validate({"name": t.name, "description": t.description,
                                            "inputSchema": dict(t.parameters)}) for t in tools.values()]
        self.session = await asyncio.to_thread(
            self.table.create, self.who, world, scenario, seed=task.seed, profile=self.config.reward_profile,
            agent=self.config.agent, agent_version=self.config.agent_version)

    def register(self, mcp: Any) -> None:
        # MCPServer's protocol handlers call these public methods: the role's catalog and schemas, not a fixed one
        mcp.list_tools = self._with_state(self.list_tools)
        mcp.call_tool = self._with_state(self.call_tool)

    async def list_tools(self) -> list[Tool]:
        return self.listed

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> CallToolResult:
        session = self.session
        if session is None:
            raise RuntimeError("no episode: the rollout's task never reached this tool server (setup_task)")
        async with self.lock:
            if session.env is None:
                self._sync(session)
                return _result(json.dumps({"status": "not_run",
                                           "error": "the episode has ended; this call was not carried out"}), True)
            action = json.dumps({"tool": name, "args": arguments, **self._usage()}, default=str)
            body = await asyncio.to_thread(self.table.step, session, session.steps, action)
            self._sync(session)
        return _result(tool_text(body["observation"]), body["status"] in ("rejected", "error", "not_run"))

    def _usage(self) -> dict[str, Any]:
        """The tokens of the model calls since the last step (none when no new call reported usage)."""
        state = self.state
        measured = state.model_calls - state.unmeasured_calls
        if measured <= state.reported_measured:
            return {}
        tokens = max(0, state.model_tokens - state.reported_tokens)
        state.reported_measured, state.reported_tokens = measured, state.model_tokens
        return {"usage": {"tokens": tokens}}

    def _sync(self, session: Session, ended_by: str | None = None) -> None:
        """Copy the episode into the rollout's state (sent to the host after the call)."""
        state = self.state
        state.episode_id, state.turns, state.caveats = session.id, session.steps, list(session.caveats or ())
        if session.env is None:
            state.ended, state.ended_by = True, ended_by or session.ended_by
            ending = ending_view(session, self.who)
            state.reward, state.reward_detail = ending["reward"], ending["reward_detail"]
            state.verdict = ending["verdict"]
            state.run_dir = str(session.run_dir.path) if session.run_dir is not None else None

    async def _settle(self) -> None:
        session = self.session
        if session is None or session.env is None:
            return
        action = json.dumps({"tool": "give_up", "args": {"reason": STOPPED_REASON}, **self._usage()})
        await asyncio.to_thread(self.table.step, session, session.steps, action)
        self._sync(session, "stopped")

    async def _shutdown(self) -> None:
        """The rollout is over: settle an episode left running, send the final state, record, close the databases."""
        try:
            if self.session is not None and self.session.env is not None:
                self._state_client = None  # the server's own HTTP client is closed by now; send with a fresh one
                await self._with_state(self._settle)()
        finally:
            await asyncio.to_thread(self.table.close)
            await asyncio.to_thread(self.recorder.flush)


if __name__ == "__main__":
    RehearsalToolset.run()
