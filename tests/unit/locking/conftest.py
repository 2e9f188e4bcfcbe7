"""Make the reference model (lockcore_model.py, next to this file) importable by the tests
under pytest's importlib import mode, which does not put test directories on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import Phase, settings

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# `--hypothesis-profile=lw-no-shrink`: report the first failing example without shrinking
# (for quick experiments such as mutation runs).
settings.register_profile("lw-no-shrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])
