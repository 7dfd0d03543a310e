"""An external agent written with nothing but curl (and jq) plays one episode to a verdict
(tests/test_curl_agent.sh against a real `rehearsal serve` on 127.0.0.1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("test_curl_agent.sh")


def test_a_curl_agent_plays_one_episode_to_a_verdict() -> None:
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    if missing:
        if os.environ.get("REHEARSAL_REQUIRE_CURL_AGENT") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_CURL_AGENT=1 but {', '.join(missing)} not installed "
                        f"(apt-get install curl jq)")
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install curl jq)")
    rehearsal = Path(sys.executable).with_name("rehearsal")
    done = subprocess.run(["bash", str(SCRIPT)], env={**os.environ, "REHEARSAL": str(rehearsal)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ended verified in 5 steps" in done.stdout
