"""Make the helpers (store_testlib.py, next to this file) importable by the tests under
pytest's importlib import mode, which does not put test directories on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
