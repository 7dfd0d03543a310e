"""OpenEnv: a world served through openenv-core's own ``create_app`` as an MCP environment.

Each tool is an MCP tool (``CallToolAction(tool_name, arguments)`` over ``/ws``, or ``tools/call``
over ``/mcp``); each WebSocket session gets its own environment and database; the final
step's observation carries ``done``, ``reward`` and the ``verdict``. Needs
``pip install rehearsal-env[openenv]``.

Serve::

    import uvicorn
    from rehearsal_env.integrations.openenv import make_app
    uvicorn.run(make_app("shop", split="train", max_concurrent_envs=64), host="127.0.0.1", port=8000)

Play (openenv-core's client machinery)::

    async with RehearsalClient(base_url="http://127.0.0.1:8000") as env:
        first = await env.reset(scenario="refund-item-0001")
        step = await env.step(CallToolAction(tool_name="get_order", arguments={"order_id": 3294}))
"""

from openenv.core.env_server import CallToolAction, ListToolsAction

from ._app import DEFAULT_SESSIONS, RehearsalClient, make_app
from ._environment import WorldEnvironment, WorldTool, environment_factory
from ._models import RehearsalObservation, RehearsalState, RehearsalToolObservation

__all__ = ["DEFAULT_SESSIONS", "CallToolAction", "ListToolsAction", "RehearsalClient", "RehearsalObservation",
           "RehearsalState", "RehearsalToolObservation", "WorldEnvironment", "WorldTool", "environment_factory",
           "make_app"]
