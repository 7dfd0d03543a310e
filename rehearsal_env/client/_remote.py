"""``RemoteEnv``: a Gymnasium env whose episodes run on a ``rehearsal serve`` server.

A training loop on another machine uses it exactly like a local env: the same spaces (read
from the server), the same observations, rewards and endings. ``info["verdict"]`` is the
verdict as JSON (a dict: outcome, ending, outcome_reward, reward, metrics, and the check
results where the key may read them) rather than a :class:`~rehearsal_env.verdict.Verdict`.
``reset()`` ends an unfinished episode first (the server records it as given up); the episode's
id on the server is ``env.episode_id``.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from ._client import Client
from ._ws import WebSocketSession

TRANSPORTS = ("http", "websocket")


class RemoteEnv(gym.Env[str, str]):
    """One scenario of a world served by ``rehearsal serve``.

    Args:
        url: The server (or a :class:`Client` to share).
        scenario: A scenario id of ``world``, or ``"world/scenario"``.
        world: The world (omit with ``"world/scenario"``).
        key: An API key (None: a server without keys, loopback only).
        profile: The reward profile (None: the outcome reward).
        agent: Stamped on every episode's record (the agent's name).
        agent_version: Stamped on every episode's record (the agent's version).
        render_mode: ``"ansi"`` or None.
        transport: ``"http"`` (a request per step) or ``"websocket"`` (one connection, one frame per step;
            the same semantics at a fraction of the server's CPU). Forks, checkpoints and health go over HTTP.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, url: str | Client, scenario: str, world: str | None = None, *, key: str | None = None,
                 profile: str | None = None, agent: str = "external", agent_version: str = "unversioned",
                 render_mode: str | None = None, transport: str = "http") -> None:
        if world is None:
            world, sep, scenario = scenario.partition("/")
            if not sep:
                raise ValueError(f"expected scenario 'WORLD/SCENARIO' or world=..., got {world!r}")
        if transport not in TRANSPORTS:
            raise ValueError(f"expected transport 'http' or 'websocket', got {transport!r}")
        self.client = url if isinstance(url, Client) else Client(url, key)
        self.transport, self._key = transport, key
        self._ws = WebSocketSession(self.client.url, key) if transport == "websocket" else None
        self._owns_client = not isinstance(url, Client)
        self.world, self.scenario, self.profile = world, scenario, profile
        self.agent, self.agent_version = agent, agent_version
        self.render_mode = render_mode
        server = self.client.health(world, profile)["server"]
        self.observation_space = self._space(server["observation_space"])
        self.action_space = self._space(server["action_space"])
        self.episode_id: str | None = None
        self._active = False
        self._step_index = 0
        self._last: tuple[int, str, str] | None = None

    @staticmethod
    def _space(spec: dict[str, Any]) -> spaces.Text:
        return spaces.Text(max_length=int(spec["max_length"]), charset=str(spec["charset"]))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._end()
        start = self._ws.start if self._ws is not None else self.client.start
        started = start(self.world, self.scenario, seed=seed or 0, profile=self.profile, agent=self.agent,
                        agent_version=self.agent_version)
        self.episode_id, self._active, self._step_index, self._last = started["episode_id"], True, 0, None
        info = {k: started[k] for k in ("world", "scenario", "split", "role", "policies", "tools", "caveats")}
        info["seed"] = seed  # as the in-process env's reset says it
        return str(started["observation"]), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.episode_id is None:
            raise RuntimeError("call reset() before step()")
        result = (self._ws.step(action, self._step_index) if self._ws is not None
                  else self.client.step(self.episode_id, action, self._step_index))
        self._step_index = int(result["step_index"])
        info: dict[str, Any] = {"turn": result["turn"], "status": result["status"], "caveats": result["caveats"]}
        if result["verdict"] is not None:
            self._active = False
            info["verdict"] = result["verdict"]
            info["outcome"] = result["verdict"]["outcome"]
            if result["reward_detail"] is not None:
                info["reward_detail"] = result["reward_detail"]
        self._last = (int(result["turn"]), action, str(result["observation"]))
        return (str(result["observation"]), float(result["reward"]), bool(result["terminated"]),
                bool(result["truncated"]), info)

    def fork(self) -> RemoteEnv:
        """A new remote env in exactly this episode's state (the server forks it: a new episode of the same key,
        its record naming this one and the turn as its parent). It shares this env's client."""
        if self.episode_id is None or not self._active:
            raise RuntimeError("cannot fork: no episode is going on (call reset(), and fork before the final step)")
        forked = self.client.fork(self.episode_id)
        return self._branch(forked)

    def checkpoint(self) -> bytes:
        """The episode's checkpoint bytes (``rehearsal_env.restore`` rebuilds them locally, :meth:`restore`
        on a server)."""
        if self.episode_id is None or not self._active:
            raise RuntimeError("cannot checkpoint: no episode is going on (call reset() first)")
        return self.client.checkpoint(self.episode_id)

    def restore(self, data: bytes) -> RemoteEnv:
        """A new remote env of the server's episode restored from checkpoint bytes (same client)."""
        return self._branch(self.client.restore(data))

    def _branch(self, started: dict[str, Any]) -> RemoteEnv:
        twin = copy.copy(self)
        twin._owns_client = False
        twin.episode_id, twin._active = started["episode_id"], True
        twin._step_index, twin._last = int(started["step_index"]), None
        if self._ws is not None:  # a connection plays one episode: the twin gets its own
            twin._ws = WebSocketSession(self.client.url, self._key)
            twin._ws.attach(twin.episode_id)
        return twin

    def render(self) -> str | None:
        if self._last is None:
            return None
        turn, action, observation = self._last
        return f"turn {turn}: {action}\n-> {observation}"

    def _end(self) -> None:
        if self.episode_id is not None and self._active:
            if self._ws is not None:
                self._ws.end()
            else:
                self.client.end(self.episode_id)
        self._active = False

    def close(self) -> None:
        self._end()
        if self._ws is not None:
            self._ws.close()
        if self._owns_client:
            self.client.close()
