"""Where rehearsal keeps a user's own state: one home, ``$REHEARSAL_HOME``, else ``~/.rehearsal``.

Everything a user registers or builds once and every later process reads lives there, whatever
folder a command runs from:

- ``world_versions/``: published world versions (``rehearsal world build``), moved alone by
  ``$REHEARSAL_WORLD_VERSIONS`` or a command's ``--versions``/``--out``;
- ``agent_profiles/``: registered agent profiles and their lineage (``rehearsal profile``,
  ``rehearsal improve``), moved alone by ``$REHEARSAL_AGENT_PROFILES`` or ``--profiles``;
- ``imported.json`` (imported worlds), ``worlds.json`` (world folders added by name), ``keys.json``
  (API keys of ``rehearsal serve``) and the run-signing keys.

Tests point ``REHEARSAL_HOME`` at a fresh folder, so they never read a user's state. Nothing here
touches the disk: each function only says where.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "REHEARSAL_HOME"
"""The environment variable that moves the state folder."""
WORLD_VERSIONS_ENV = "REHEARSAL_WORLD_VERSIONS"
"""The environment variable that moves the published world versions alone."""
AGENT_PROFILES_ENV = "REHEARSAL_AGENT_PROFILES"
"""The environment variable that moves the agent profile store alone."""


def home() -> Path:
    """The state folder: ``$REHEARSAL_HOME``, else ``~/.rehearsal`` (it may not exist yet)."""
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".rehearsal").expanduser()


def world_versions() -> Path:
    """Published world versions: ``$REHEARSAL_WORLD_VERSIONS``, else ``HOME/world_versions``."""
    chosen = os.environ.get(WORLD_VERSIONS_ENV)
    return Path(chosen).expanduser() if chosen else home() / "world_versions"


def agent_profiles() -> Path:
    """The agent profile store: ``$REHEARSAL_AGENT_PROFILES``, else ``HOME/agent_profiles``."""
    chosen = os.environ.get(AGENT_PROFILES_ENV)
    return Path(chosen).expanduser() if chosen else home() / "agent_profiles"
