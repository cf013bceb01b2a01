"""Makes ``steplens.hta`` importable for the tests before the Rust module is built.

When ``steplens`` imports (a ``maturin develop`` build, or an installed wheel), nothing changes.
When it does not (no native ``steplens._steplens`` yet, or no ``steplens/__init__.py``), a bare
``steplens`` package pointing at ``python/steplens`` is registered, so ``steplens.hta`` imports
from the source tree without running ``__init__``. The HTA tests load traces through
``_reference_loader`` in that case.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import types

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1] / "steplens"

try:
    import steplens  # noqa: F401
except ImportError:
    steplens = None  # type: ignore[assignment]
if steplens is not None:
    # A build whose package lacks hta.py (an older wheel) still finds the source tree's.
    if hasattr(steplens, "__path__") and importlib.util.find_spec("steplens.hta") is None:
        steplens.__path__.append(str(_PACKAGE_DIR))  # type: ignore[attr-defined]
else:
    for name in [m for m in sys.modules if m == "steplens" or m.startswith("steplens.")]:
        del sys.modules[name]
    _stub = types.ModuleType("steplens")
    _stub.__path__ = [str(_PACKAGE_DIR)]  # type: ignore[attr-defined]
    _stub.__file__ = None
    sys.modules["steplens"] = _stub
