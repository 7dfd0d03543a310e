"""The training script learns, on the train split, behaviour that verifies on holdout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "training" / "reinforce_behaviours.py"


def test_reinforce_raises_the_expected_holdout_verified_rate() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--iterations", "10"], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    before, after = (float(x) for x in re.findall(r"expected holdout verified rate (\d+)%", out))
    assert after > before + 30, out
