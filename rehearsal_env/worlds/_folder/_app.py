"""The ``[application]`` of a folder world (what the sandbox runs) and what ``http`` tools call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._world import World
from ._paths import inside
from ._source import Source


@runtime_checkable
class Application(Protocol):
    """What ``http`` tools call: a running application (the sandbox's database provides it)."""

    def request(self, method: str, path: str, *, query: Mapping[str, Any], body: Mapping[str, Any] | None,
                headers: Mapping[str, str]) -> tuple[int, Any]:
        """Send one request; return (status, decoded JSON answer). Raises DatabaseError when unreachable."""
        ...


@dataclass(frozen=True)
class ApplicationLimits:
    """What the application's container may use (``[application.limits]``; the sandbox enforces each)."""

    memory_mb: int = 512
    """Memory (and memory plus swap: no swap) in MiB; past it the kernel kills the largest process."""
    pids: int = 256
    """Processes and threads at once; a fork past it fails."""
    cpus: float = 1.0
    """CPU time, in cores."""
    tmpfs_mb: int = 64
    """The writable ``/tmp`` (a tmpfs, counted in the memory too); the rest of the filesystem is read-only."""


LIMIT_BOUNDS: dict[str, tuple[float, float]] = {"memory_mb": (64, 65536), "pids": (16, 32768),
                                                 "cpus": (0.1, 64), "tmpfs_mb": (1, 16384)}
"""The values ``[application.limits]`` accepts, per field (inclusive)."""


@dataclass(frozen=True)
class ApplicationSpec:
    """The ``[application]`` of a folder world: what the sandbox builds and runs."""

    folder: Path
    """The application's files (copied into its image)."""
    command: tuple[str, ...]
    """How the container starts it."""
    port: int
    """The port it listens on inside its container."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment; ``{dsn}``, ``{email_url}``, ``{payments_url}`` and ``{now}`` are filled in."""
    health: str = "/health"
    """A GET path answering 200 once the application is up."""
    probe: str = "/"
    """A GET path whose answer must be identical after every reset."""
    reset_hook: str | None = None
    """``"METHOD /path"`` called after each database restore; None: no state outside the database."""
    limits: ApplicationLimits = ApplicationLimits()
    """What its container may use (the defaults unless ``[application.limits]`` says otherwise)."""


def application_of(world: World) -> ApplicationSpec | None:
    """The application a folder world's ``http`` tools call (None: the world runs in process)."""
    return world.application if isinstance(world.application, ApplicationSpec) else None


def backend_for(world: World) -> str:
    """The backend a world needs: ``docker`` when its tools call its application, else ``sqlite``."""
    return "docker" if application_of(world) is not None else "sqlite"



def parse_application(src: Source, folder: Path, raw: dict[str, Any]) -> ApplicationSpec:
    where = f"{src.path}:{src.line('application', 0, 'folder' if 'folder' in raw else None)}"
    app_folder = inside(folder, raw.get("folder", "app"), where, "[application] folder", directory=True)
    if app_folder == folder.resolve():
        raise src.error(src.line("application", 0, "folder"), "[application] folder is the world folder itself",
                        'put the application in a subfolder and write folder = "app"')
    if not raw.get("command"):
        raise src.error(src.line("application", 0), "[application] needs a command",
                        'write folder = "app" and command = ["python3", "/app/server.py"]')
    return ApplicationSpec(app_folder, tuple(raw["command"]), int(raw.get("port", 8080)),
                           dict(raw.get("env", {})), raw.get("health", "/health"), raw.get("probe", "/"),
                           raw.get("reset_hook") or None, _limits(src, raw.get("limits", {})))


def _limits(src: Source, raw: Any) -> ApplicationLimits:
    """``[application.limits]``: each field a number within :data:`LIMIT_BOUNDS`; absent fields keep defaults."""
    table = "[application.limits]" in src.text
    line = src.line("application.limits") if table else src.line("application", 0, "limits")
    if not isinstance(raw, dict):
        raise src.error(line, f"[application] limits is {raw!r}, not a table",
                        "write [application.limits] with memory_mb, pids, cpus and tmpfs_mb")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in LIMIT_BOUNDS:
            raise src.error(line, f"[application.limits] has no field {key!r}",
                            f"use only {', '.join(LIMIT_BOUNDS)}")
        low, high = LIMIT_BOUNDS[key]
        whole = key != "cpus"
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) \
                or not low <= value <= high:
            raise src.error(line, f"[application.limits] {key} = {value!r} is not a "
                            f"{'whole ' if whole else ''}number from {low:g} to {high:g}",
                            f"write {key} = {ApplicationLimits.__dataclass_fields__[key].default}")
        values[key] = value
    return ApplicationLimits(**values)

