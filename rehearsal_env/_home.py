"""Where rehearsal keeps a user's own state: ``$REHEARSAL_HOME``, else ``~/.rehearsal``.

It holds what a user registers once and every later process reads: imported worlds
(``imported.json``), world folders added by name (``worlds.json``) and API keys (``keys.json``).
Tests point ``REHEARSAL_HOME`` at a fresh folder, so they never read a user's state.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "REHEARSAL_HOME"
"""The environment variable that moves the state folder."""


def home() -> Path:
    """The state folder: ``$REHEARSAL_HOME``, else ``~/.rehearsal`` (it may not exist yet)."""
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".rehearsal").expanduser()
