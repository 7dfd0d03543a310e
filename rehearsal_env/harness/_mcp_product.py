"""The product's own tools over MCP: worlds and scenarios, runs, their summaries, measure, readiness, rescore.

Runs live under one root folder (``--runs-root``); every run a tool names is a folder name under it,
and a name that leads outside it is refused. No tool returns a scenario's checks or reference
solution (the HTTP API's rule for holdout scenarios, applied here to every scenario and key).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread
import jsonschema
from mcp import types
from mcp.server.lowlevel import Server

from .._version import __version__
from ..episodes import Principal
from ..measure import load_run, summarize, to_json
from ..readiness import assess
from ..records import read_records
from ..rescore import rescore_run
from ..rewards import profile_names
from ..runner import RunConfig, run
from ..worlds import backend_for, load_world, world_names

MAX_RUN_EPISODES = 500
"""Most episodes one ``start_run`` call plays (scenarios times repeats)."""
_RUN = {"type": "string", "minLength": 1, "maxLength": 200,
        "description": "a run's folder name under the server's runs root"}
_SPLIT = {"type": "string", "enum": ["train", "dev", "holdout"]}


def _tool(name: str, description: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> types.Tool:
    schema = {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}
    return types.Tool(name=name, description=description, input_schema=schema)


TOOLS = [
    _tool("list_worlds", "The worlds: name, description, scenario counts per split", {}),
    _tool("list_scenarios", "A world's scenarios (id, split, role, category, request, turn limit)",
          {"world": {"type": "string", "maxLength": 200}, "split": _SPLIT}, ("world",)),
    _tool("start_run", "Run an agent (reference, null, wrong:NAME, openai:MODEL or a registered profile) over a "
                       "world's scenarios; returns the run's name and summary when it is done",
          {"world": {"type": "string", "maxLength": 200},
           "agent": {"type": "string", "maxLength": 200, "default": "reference"}, "split": _SPLIT,
           "scenarios": {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": 200},
           "repeats": {"type": "integer", "minimum": 1, "maximum": 20, "default": 1},
           "seed": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1, "default": 0},
           "reward_profile": {"type": "string", "maxLength": 100}}, ("world",)),
    _tool("read_summary", "A run's summary.json", {"run": _RUN}, ("run",)),
    _tool("measure", "A run's headline numbers with intervals, per agent version (measure.py's report)",
          {"run": _RUN, "split": _SPLIT}, ("run",)),
    _tool("readiness", "'Ready to pilot' or 'Needs work' per agent version and world version",
          {"runs": {"type": "array", "items": _RUN, "minItems": 1, "maxItems": 50}}, ("runs",)),
    _tool("rescore", "Re-grade a run under a reward profile from its records (written to RUN/rescore-PROFILE)",
          {"run": _RUN, "reward_profile": {"type": "string", "maxLength": 100}}, ("run", "reward_profile")),
]


class Product:
    """The tools' work, on runs under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def run_dir(self, name: str) -> Path:
        path = (self.root / name).resolve()
        if not path.is_relative_to(self.root) or path == self.root:
            raise ValueError(f"expected a run's folder name under {self.root}, got {name[:200]!r}")
        if not path.is_dir():
            raise ValueError(f"no run {name[:200]!r} under {self.root}; start_run makes one")
        return path

    def list_worlds(self) -> Any:
        described = [load_world(n).describe() for n in world_names()]
        return [{k: d[k] for k in ("name", "description", "scenarios")} for d in described]

    def list_scenarios(self, world: str, split: str | None = None) -> Any:
        return [{"id": s.id, "split": s.split, "role": s.role, "category": s.category, "request": s.request,
                 "turn_limit": s.turn_limit} for s in load_world(world).scenarios(split)]  # type: ignore[arg-type]

    def start_run(self, world: str, agent: str = "reference", split: str | None = None,
                  scenarios: list[str] | None = None, repeats: int = 1, seed: int = 0,
                  reward_profile: str | None = None) -> Any:
        loaded = load_world(world)
        count = len(scenarios) if scenarios else len(loaded.scenarios(split))  # type: ignore[arg-type]
        if count * repeats > MAX_RUN_EPISODES:
            raise ValueError(f"expected at most {MAX_RUN_EPISODES} episodes per start_run, got {count} scenarios x "
                             f"{repeats} repeats; narrow the split or scenarios, or use `rehearsal run`")
        if reward_profile is not None and reward_profile not in profile_names():
            raise ValueError(f"unknown reward profile {reward_profile!r}; known: {', '.join(profile_names())}")
        config = RunConfig(world=world, agent=agent, split=split, scenarios=tuple(scenarios or ()),  # type: ignore[arg-type]
                           repeats=repeats, seed=seed, backend=backend_for(loaded), reward_profile=reward_profile)
        self.root.mkdir(parents=True, exist_ok=True)
        summary = run(config, self.root / config.run_id)
        return {"run": config.run_id, "summary": summary}

    def read_summary(self, run: str) -> Any:
        path = self.run_dir(run) / "summary.json"
        if not path.exists():
            raise ValueError(f"run {run!r} has no summary.json yet")
        return json.loads(path.read_text())

    def measure(self, run: str, split: str | None = None) -> Any:
        return [json.loads(to_json(summarize(r))) for r in load_run(self.run_dir(run), split)]

    def readiness(self, runs: list[str]) -> Any:
        records = [r for name in runs for r in read_records(self.run_dir(name))]
        return [{**asdict(v), "label": v.label, "not_scored_share": v.not_scored_share} for v in assess(records)]

    def rescore(self, run: str, reward_profile: str) -> Any:
        return rescore_run(self.run_dir(run), reward_profile).to_dict()


def product_server(root: str | Path, who: Principal) -> Server[Any]:
    """The MCP server of the product's tools on runs under ``root``, for ``who``.

    A tool's result is ``{"result": ...}`` as ``structuredContent`` and as JSON text; a tool that fails (a name
    that leads outside the runs root, an unknown world) is a result with ``isError`` and the reason as text."""
    product = Product(root)
    handlers: dict[str, Callable[..., Any]] = {t.name: getattr(product, t.name) for t in TOOLS}
    schemas = {t.name: t.input_schema for t in TOOLS}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            if params.name not in handlers:
                raise ValueError(f"unknown tool {params.name[:80]!r}; this server has: {', '.join(handlers)}")
            arguments = params.arguments or {}
            try:  # the schemas bound every size (the SDK 2.x low-level server validates nothing)
                jsonschema.validate(arguments, schemas[params.name])
            except jsonschema.ValidationError as exc:
                raise ValueError(f"arguments of {params.name} do not fit its input schema: {exc.message[:300]}") \
                    from None
            result = await anyio.to_thread.run_sync(partial(handlers[params.name], **arguments))
        except Exception as exc:  # the caller's mistake or the run's failure, told to the caller as a tool error
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"{type(exc).__name__}: {exc}")],
                                        is_error=True)
        structured = {"result": json.loads(json.dumps(result, default=str))}
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(structured))],
                                    structured_content=structured)

    return Server("rehearsal-env-product", version=__version__,
                  instructions="rehearsal-env's own tools: list worlds and scenarios, start a run, read its summary, "
                               f"measure it, judge readiness, rescore. Runs live under {product.root}. Scenarios' "
                               f"checks are never served. Caller: {who.key_id} ({who.scope.value}).",
                  on_list_tools=list_tools, on_call_tool=call_tool)
