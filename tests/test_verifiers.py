"""The legacy verifiers adapter (verifiers 0.3's ``MultiTurnEnv``) is retired: importing it, or loading it the way
verifiers 0.3 did (by module name), fails with a message that points at its successor, ``verifiers_v1``.

Runs without any extra (the retired module imports nothing of verifiers).
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


def test_importing_the_retired_adapter_points_at_verifiers_v1() -> None:
    with pytest.raises(ImportError) as raised:
        importlib.import_module("rehearsal_env.integrations.verifiers")
    message = str(raised.value)
    assert "retired" in message and "verifiers 0.4 removed" in message
    assert "rehearsal_env.integrations.verifiers_v1" in message and "vf-eval rehearsal-verifiers" in message


def test_a_script_of_the_old_api_fails_at_once_with_the_pointer() -> None:
    """What a user's old script sees: one ImportError naming the successor (no partial import, no other error)."""
    run = subprocess.run([sys.executable, "-c", "from rehearsal_env.integrations.verifiers import load_environment"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: rehearsal_env.integrations.verifiers (verifiers 0.3's MultiTurnEnv")
    assert "verifiers_v1" in last
