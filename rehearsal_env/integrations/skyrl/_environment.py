"""A world's scenario as a SkyRL-Gym ``BaseTextEnv``: text in, text out, one env per trajectory.

SkyRL's generator (``skyrl.train.generators.skyrl_gym_generator.SkyRLGymGenerator.agent_loop``) makes one env per
trajectory with ``skyrl_gym.make(env_class, env_config=cfg.environment.skyrl_gym.<env_class>, extras=row)``, calls
``init(prompt)`` for the first messages, then ``step(model_text)`` once per generation until ``done``, and
``close()``. Here:

- ``extras`` (the dataset row, :func:`dataset_rows`) names the ``world``, ``scenario`` and ``seed``; ``env_config``
  may set ``world``, ``profile`` (default ``rl``), ``backend``, ``stress``, ``out`` (default ``runs/skyrl``),
  ``agent`` and ``agent_version``;
- ``init`` starts the scenario on a database in the snapshot state and returns the served agent's messages (the
  system message with the role's tools as ``rehearsal models serve`` shows them, and the customer's opening
  words), whatever the row's placeholder prompt was;
- ``step`` plays the model's text as the ``openai`` agent would (:class:`~.._replies.ReplyPlayer`: each
  ``<tool_call>`` one env step, text alone to the customer) and returns the results as ``tool`` messages (the
  customer's answer to text as a ``user`` message); the reward is per turn under ``rl_turns`` and the episode's
  at its end otherwise; ``metadata`` carries the ``verdict`` view at the end (:func:`ending_view`) and ``scored``;
- the trainer's ``max_turns`` (``extras``) reached, or ``close`` with the episode open, ends it for the agent
  (``give_up``), judged and recorded: every episode lands, sealed, in ``OUT/<world>-<profile>/`` (written every 32
  episodes, every 30 s and at exit); the session and its database are kept for the next trajectory
  (:mod:`~rehearsal_env.integrations._idle`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from ...scenarios import Split
from ...worlds import World, load_world
from .._idle import give, take
from .._idle import world as _world
from .._replies import ReplyPlayer, Turn, prompt

ENV_CLASS = "rehearsal"
"""The id :func:`register` gives the env in SkyRL-Gym's registry (the rows' ``env_class``)."""
DEFAULT_OUT = "runs/skyrl"
"""Where the episodes are recorded unless ``env_config`` names another ``out`` (None: not recorded)."""
AGENT = "skyrl"
"""The agent name on the records unless ``env_config`` names another ``agent``."""

def _get(config: Any, key: str, default: Any) -> Any:
    """``config[key]`` of a mapping or an OmegaConf ``DictConfig`` (SkyRL passes either), else ``default``."""
    if config is None:
        return default
    getter = getattr(config, "get", None)
    return getter(key, default) if getter is not None else default


class RehearsalTextEnv(BaseTextEnv):  # type: ignore[misc]  # skyrl_gym ships no type information
    """One episode of a rehearsal-env scenario (see the module doc)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        nested = extras.get("extra_info")
        row = {**(dict(nested) if isinstance(nested, Mapping) else {}), **extras}
        world_name = row.get("world") or _get(env_config, "world", None)
        scenario = row.get("scenario")
        if not world_name or not scenario:
            raise ValueError(f"a rehearsal env needs the row's 'world' and 'scenario' (got columns {sorted(row)}); "
                             "build the dataset with rehearsal_env.integrations.skyrl.dataset_rows(world, split)")
        world = _world(str(world_name))
        self.scenario = world.scenario(str(scenario).rpartition("/")[2])
        self.seed = int(row.get("seed", 0))
        out = _get(env_config, "out", DEFAULT_OUT)
        self.session = take(world, profile=_get(env_config, "profile", "rl"),
                            backend=_get(env_config, "backend", "sqlite"),
                            stress=bool(_get(env_config, "stress", True)),
                            out=str(out) if out is not None else None, agent=str(_get(env_config, "agent", AGENT)),
                            agent_version=str(_get(env_config, "agent_version", "unversioned")))
        self.player = ReplyPlayer(self.session)
        self._held = True
        self.episode_id: str | None = None
        """The episode this env started (None before ``init``)."""
        self.max_turns = int(row.get("max_turns") or 0)
        """The trainer's limit on generations (0: none but the scenario's own turn budget)."""

    def init(self, prompt_messages: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Start the episode; the served agent's first messages and the reset's ``info``."""
        if not self._held:
            raise RuntimeError("init() after close(): make an env per trajectory (skyrl_gym.make)")
        opening = self.session.start(self.scenario, seed=self.seed)
        self.episode_id = self.session.episode_id
        self.player.started()
        self.turns = 0
        return prompt(self.session, opening, tools_in_system=True), dict(self.session.info)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play one generation (the model's text)."""
        if not self._held or self.episode_id is None or self.session.episode_id != self.episode_id:
            raise RuntimeError("step() before init() or after close(): this env's episode is not running here; make "
                               "an env per trajectory (skyrl_gym.make), init it, then step")
        self.turns += 1
        turn: Turn = self.player.play_text(str(action))
        reward, done, scored = turn.reward, turn.done, turn.scored
        if not done and self.max_turns and self.turns >= self.max_turns:  # the trainer's budget: ended for the agent
            self.session.settle()
            done, scored = True, self.session.reward is not None
            reward = reward + self.session.last_reward if self.session.shaped else self.session.reward or 0.0
        metadata: dict[str, Any] = {"scored": scored, "episode_id": self.session.episode_id}
        if done:
            metadata["verdict"] = self.session.ending()["verdict"]
        observations = [] if done else [{"role": m.role, "content": m.content} for m in turn.messages]
        return BaseTextEnvStepOutput(observations=observations, reward=float(reward), done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """The ended episode's numbers SkyRL averages over a batch: ``verified`` (1/0), ``reward``, ``turns``."""
        verdict = self.session.verdict
        if verdict is None:
            return {"turns": self.turns}
        return {"verified": float(verdict.outcome.value == "verified"), "reward": self.session.reward or 0.0,
                "turns": self.turns}

    def close(self) -> None:
        """End an open episode for its agent (``give_up``, recorded); the session waits for the next trajectory
        (:mod:`.._idle`)."""
        if self._held:  # once: a closed env's session may already play another trajectory
            self._held = False
            give(self.session)


def dataset_rows(world: str | World, split: Split = "train", *, seeds: int = 1) -> list[dict[str, Any]]:
    """One SkyRL row per scenario of ``split`` and seed: ``prompt`` (a placeholder: ``init`` gives the real one),
    ``env_class`` (:data:`ENV_CLASS`), ``world``, ``scenario``, ``seed`` and ``data_source``."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    w = load_world(world) if isinstance(world, str) else world
    return [{"data_source": f"rehearsal-env/{w.name}", "env_class": ENV_CLASS,
             "prompt": [{"role": "user", "content": f"(scenario {s.id}: the env's init gives the prompt)"}],
             "world": w.name, "scenario": s.id, "seed": seed, "split": s.split}
            for s in w.scenarios(split) for seed in range(seeds)]


def register(env_class: str = ENV_CLASS) -> str:
    """Register :class:`RehearsalTextEnv` in SkyRL-Gym's registry under ``env_class`` (once); return the id."""
    import skyrl_gym
    from skyrl_gym.envs.registration import registry

    if env_class not in registry:
        skyrl_gym.register(id=env_class, entry_point=f"{__name__}:RehearsalTextEnv")
    return env_class
