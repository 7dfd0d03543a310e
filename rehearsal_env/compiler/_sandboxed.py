"""The application in the Docker sandbox, as the phases use it, and the choice between it and local processes.

The plan phase decides where the application runs (``[application] runtime``): ``docker`` runs every phase
that needs the application on the existing sandbox (``rehearsal_env.sandbox``: the world folder as written
so far, its application in a container built from it on the sandbox's base image, its database in a
PostgreSQL container, the outside-service emulator beside it, on a network of their own with no route
out); ``local`` runs it as local processes (``._runtime``); ``auto`` (the default) takes the sandbox
where a Docker daemon answers. :class:`SandboxRuntime` is the sandbox's database with what the phases
read of a runtime (``spec``, ``running``), so a phase neither knows nor cares which one it was given.
Each phase starts its own and closes it (its containers and network removed), so a compile killed in a
phase rebuilds the sandbox when it resumes; the sandbox's own reaper removes what a killed process left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..sandbox import SandboxDatabase, SandboxFailed
from ..worlds import ApplicationSpec, World
from ._errors import CompileError
from ._runtime import LocalRuntime, docker_available

RUNTIMES = ("auto", "docker", "local")
"""``[application] runtime`` values: where the application runs while the compile runs it."""
DOCKER, LOCAL = "docker-sandbox", "local-process"
"""The plan's ``runtime``: the sandbox, or local processes."""


class SandboxRuntime(SandboxDatabase):
    """The world folder's application in the Docker sandbox (see the module docstring)."""

    def __init__(self, world: World, *, phase: str, verify_reset: bool = True) -> None:
        self.phase = phase
        import docker.errors  # type: ignore[import-untyped]

        try:
            super().__init__(world, verify_reset=verify_reset)
        except (SandboxFailed, docker.errors.DockerException) as exc:  # the SDK's: a container that stopped at once
            raise CompileError(phase, f"expected the application to start in the Docker sandbox and answer its health "
                               f"check; it did not ({type(exc).__name__}: {str(exc).splitlines()[0][:300]}). Fix: "
                               "check its command and health path, or set [application] runtime = \"local\"") from None
        if self.app is None:
            self.close()
            raise CompileError(phase, "expected a world with an [application]; found none")
        self.spec: ApplicationSpec = self.app
        """The application as the world folder declares it (health, probe, reset hook)."""

    def __enter__(self) -> SandboxRuntime:
        return self

    def running(self) -> list[str]:
        """The sandbox's containers still running (empty once closed)."""
        return list(self.containers()) if self._inner is not None else []


Runtime = LocalRuntime | SandboxRuntime
"""What a phase that needs the application is given."""


def plan_runtime(choice: str) -> tuple[str, str]:
    """The plan's runtime for ``[application] runtime`` = ``choice``, and why."""
    daemon = docker_available()
    if choice == "docker" and not daemon:
        raise CompileError("plan", "expected a Docker daemon ([application] runtime = \"docker\"); none answers. "
                           "Fix: start dockerd, or set runtime = \"local\"")
    if choice == "docker" or (choice == "auto" and daemon):
        return DOCKER, ("the application runs in the Docker sandbox: its container built from the world folder, "
                        "its own PostgreSQL container and network, no route out")
    why = ("[application] runtime = \"local\"" if choice == "local" else "no Docker daemon answers here")
    return LOCAL, (f"{why}: the application runs as local processes on 127.0.0.1 with its own PostgreSQL "
                   "database, without the sandbox's isolation")


def start_runtime(world: World, world_dir: Path, plan: dict[str, Any], phase: str, *,
                  verify_reset: bool = True) -> Runtime:
    """The application of the world folder ``world_dir`` started where ``plan`` (the plan phase's result) says."""
    if plan["runtime"] == DOCKER:
        return SandboxRuntime(world, phase=phase, verify_reset=verify_reset)
    local = plan["local"]
    return LocalRuntime(world, world_dir / "app", local["command"], local["env"], phase=phase,
                        verify_reset=verify_reset, start_timeout_s=local.get("start_timeout_s", 30))
