"""A world as a TRL ``environment_factory`` class.

TRL's contract (``trl/trainer/grpo_trainer.py``): a class with a no-argument ``__init__``;
``reset(**row)`` gets the dataset row's columns and returns text appended to the last
user message (or None); every other public function of the class is a tool, called as
``method(**arguments)`` with what the model sent; an optional ``get_reward()`` scores the
rollout once it is over. TRL makes one instance per rollout slot and reuses it (reset,
then tools, then ``get_reward``).

Here ``reset(scenario=..., seed=...)`` starts that scenario on the instance's own
database (opened once, reset per episode) and returns the customer's opening words;
each tool call is one env step and returns the tool message the ``openai`` agent would
read for it (:func:`~rehearsal_env.agents.tool_content`: the result and the turns left), so
a policy trains on the text it is evaluated on; the customer's later messages (a change of
request, a repeat) come back inside tool results under ``"messages"``. The dataset's system
message is the agent's too. The rollout ends when the model stops calling tools, so
``get_reward`` settles the verdict itself: an episode still running ends with
``give_up`` (``STOPPED_REASON``). It returns the reward under the class's profile, or
None for an episode that was not scored (the environment failed): TRL leaves a None
reward out of that rollout's sum instead of counting it against the model.

Every episode is recorded, sealed, into ``OUT/<world>-<profile>/`` (class attribute ``out``, default
``runs/trl``; ``measure.py`` and ``rehearsal readiness`` read it), under the agent name and version the class
names: the instances of a process share one recorder, written every 32 episodes, every 30 s and at exit.

Properties (not functions, so TRL never shows them as tools) expose the ``verdict``, the
``episode`` and the ``session``.
"""

from __future__ import annotations

from typing import Any

from ...env import Episode
from ...scenarios import Scenario, Split
from ...tools import Tool
from ...verdict import Verdict
from ...worlds import World, load_world
from .._prompt import opening_text, tool_text
from .._session import Session, tool_sets
from ._methods import tool_method

DEFAULT_OUT = "runs/trl"
"""Where a class records its episodes unless ``out=`` names another place."""
AGENT = "trl"
"""The agent name on the records unless ``agent=`` names another."""


class ToolEnvironment:
    """The base of every generated class: one episode at a time of :attr:`world` (see the module doc)."""

    world: World
    """The world (set on each generated class)."""
    split: Split | None
    """The split whose scenarios ``reset`` accepts (None: any)."""
    profile: str | None
    """The reward profile of ``get_reward`` (None: the outcome reward 1 / 0 / -1)."""
    backend: str = "sqlite"
    """The database backend of each instance."""
    stress: bool = True
    """Whether the stress layer is on."""
    out: str | None = DEFAULT_OUT
    """Where the episodes are recorded (``OUT/<world>-<profile>/``; None: not recorded)."""
    agent: str = AGENT
    """The agent's name on the records."""
    agent_version: str = "unversioned"
    """The agent's version on the records (e.g. the run's checkpoint)."""
    tool_schemas: tuple[dict[str, Any], ...] = ()
    """The tools as the served ``openai`` agent sends them: the world's schemas, in the world's order (TRL renders
    its own from the methods unless :func:`render_as_served` is applied to the trainer)."""

    def __init__(self) -> None:
        self._session = Session(self.world, profile=self.profile, backend=self.backend, stress=self.stress,
                                out=self.out, agent=self.agent, agent_version=self.agent_version)
        self._turn_rewards: list[float] = []

    def reset(self, scenario: str | None = None, seed: int = 0, **row: Any) -> str:
        """Start ``scenario`` (a dataset row's ``scenario`` column); return the customer's opening words.

        Raises:
            ValueError: no scenario given, or one outside the class's split.
        """
        if scenario is None:
            raise ValueError(f"reset() needs the row's 'scenario' column (a scenario id of world "
                             f"{self.world.name!r}); got only {sorted(row)}. Build the dataset with "
                             "rehearsal_env.integrations.trl.dataset(world, split)")
        chosen: Scenario = self.world.scenario(scenario.rpartition("/")[2])
        if self.split is not None and chosen.split != self.split:
            raise ValueError(f"scenario {chosen.id!r} is in split {chosen.split!r}, but this environment class "
                             f"serves split {self.split!r}; make one with environment_class(world, "
                             f"split={chosen.split!r})")
        self._turn_rewards = []
        return opening_text(self._session.start(chosen, seed=int(seed)))

    def get_reward(self) -> float | None:
        """The episode's reward, ending it first with ``give_up`` when the model stopped calling tools."""
        running = not self._session.ended
        self._session.settle()
        if running:
            self._turn_rewards.append(self._session.last_reward)  # the settling give_up's
        return self._session.reward

    def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        running = not self._session.ended
        text = tool_text(self._session.call(tool, arguments))
        if running:
            self._turn_rewards.append(self._session.last_reward)
        return text

    @property
    def turn_rewards(self) -> tuple[float, ...]:
        """Each turn's reward of the current episode so far (under a shaped profile such as ``rl_turns`` they sum to
        :meth:`get_reward`'s; under another, all 0 but the last). :func:`turn_progress` reads them for TRL."""
        return tuple(self._turn_rewards)

    @property
    def verdict(self) -> Verdict | None:
        """The current episode's verdict (None while it runs or before ``reset``)."""
        return self._session.verdict

    @property
    def episode(self) -> Episode | None:
        """The current episode (None before ``reset``)."""
        return self._session.env.episode if self._session.env is not None else None

    @property
    def session(self) -> Session:
        """The :class:`~rehearsal_env.integrations.Session` playing the episodes."""
        return self._session

    def _close(self) -> None:
        self._session.close()


_TAKEN = frozenset(n for n in dir(ToolEnvironment) if not n.startswith("_")) | frozenset(
    ToolEnvironment.__annotations__)
"""The class's own attributes and properties, which no tool may shadow."""


def _class_name(world: World, suffix: str = "") -> str:
    words = [w for part in (world.name, suffix) for w in part.replace("+", "_").replace("-", "_").split("_") if w]
    return "".join(w[:1].upper() + w[1:] for w in words) + "Environment"


def _make_class(world: World, split: Split | None, profile: str | None, tools: dict[str, Tool], name: str,
                backend: str, stress: bool, recording: dict[str, Any]) -> type[ToolEnvironment]:
    body: dict[str, Any] = {"world": world, "split": split, "profile": profile, "backend": backend,
                            "stress": stress, **recording, "tool_schemas": tuple(t.schema() for t in tools.values()),
                            "__doc__": f"World {world.name!r} as a TRL environment "
                            f"({', '.join(tools)})."}
    for tool in tools.values():
        if tool.name in _TAKEN:
            raise ValueError(f"tool {tool.name!r} of world {world.name!r} cannot be a TRL environment method: the "
                             f"class uses that name itself (one of {sorted(_TAKEN)}); rename the tool")
        body[tool.name] = tool_method(tool, ToolEnvironment._call)
    cls = type(name, (ToolEnvironment,), body)
    for tool_name in tools:
        getattr(cls, tool_name).__qualname__ = f"{name}.{tool_name}"
    return cls


def _world(world: str | World) -> World:
    return load_world(world) if isinstance(world, str) else world


def environment_class(world: str | World, split: Split | None = "train", profile: str | None = "rl", *,
                      backend: str = "sqlite", stress: bool = True, out: str | None = DEFAULT_OUT,
                      agent: str = AGENT, agent_version: str = "unversioned") -> type[ToolEnvironment]:
    """A TRL environment class for ``world``'s scenarios of ``split``: pass it as ``environment_factory``.

    Its tools are every tool some scenario of the split has (the union over roles). A scenario's
    role may lack one of them: calling it is a rejected attempt, as in the Gymnasium env. For prompts
    that show each scenario exactly its own tools, use :func:`environment_classes` with
    ``dataset(world, split, routed=True)``. ``out``, ``agent`` and ``agent_version``: where and as whom the
    episodes are recorded (``out=None``: not recorded).
    """
    w = _world(world)
    union: dict[str, Tool] = {}
    for tools in tool_sets(w, w.scenarios(split)).values():
        union.update(tools)
    return _make_class(w, split, profile, union, _class_name(w), backend, stress,
                       {"out": out, "agent": agent, "agent_version": agent_version})


def environment_classes(world: str | World, split: Split | None = "train", profile: str | None = "rl", *,
                        backend: str = "sqlite", stress: bool = True, out: str | None = DEFAULT_OUT,
                        agent: str = AGENT, agent_version: str = "unversioned") -> dict[str, type[ToolEnvironment]]:
    """One class per tool set of the split (``ROLE`` or ``ROLE+retry``), for TRL's dict ``environment_factory``;
    the rows of ``dataset(world, split, routed=True)`` name theirs in the ``environment`` column."""
    w = _world(world)
    recording = {"out": out, "agent": agent, "agent_version": agent_version}
    return {name: _make_class(w, split, profile, tools, _class_name(w, name), backend, stress, recording)
            for name, tools in tool_sets(w, w.scenarios(split)).items()}
