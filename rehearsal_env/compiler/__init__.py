"""The world compiler: an application at one version becomes a validated world folder, in nine phases.

``rehearsal world compile SOURCE --out FOLDER`` (:func:`compile_world`): *inspect* what runs (``._source``),
*plan* its runtime and *materialize* it on its own PostgreSQL database (``._runtime``: local processes
where no Docker daemon answers), *discover* its operations and schema (``._openapi``), *seed* its
fictional data (from a generator, and through its own API: ``._seedapi``), *adapt* the operations into
typed tools, *author* jobs from what its writes actually change (``._author``, ``._evidence``; with
``--model``, a model's proposals too, ``._model``), *validate* every job with the existing gate and a
bounded repair loop (``._gate``), and *package* the world folder and its page (``._package``). Each
phase writes its result under ``FOLDER/.compile`` before the next starts (``._phases``), so a killed
compile resumes where it was. With a live agent, a model then tries every job once (``._live``):
evidence for the page, never a reason to keep a job out.
"""

from ._compile import CompileResult, compile_world
from ._errors import CompileError
from ._live import summary_line
from ._model import JOBS_SCHEMA, PROMPT_VERSION, ModelConfig, read_jobs
from ._phases import PHASES
from ._runtime import LocalRuntime, docker_available

__all__ = [
    "PHASES",
    "JOBS_SCHEMA",
    "PROMPT_VERSION",
    "CompileError",
    "CompileResult",
    "LocalRuntime",
    "ModelConfig",
    "compile_world",
    "docker_available",
    "read_jobs",
    "summary_line",
]
