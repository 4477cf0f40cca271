"""Load LanceDB without the REST namespace client it imports and a local table never uses.

`import lancedb` imports `lance_namespace_urllib3_client`, whose `__init__` (generated REST API
modules, `urllib3`) is about two thirds of the import. `defer_namespace_client` puts a stand-in
for that package in `sys.modules`: its `models` import as usual through the real `__path__`,
and the first use of anything else runs the real `__init__` in place first.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["defer_namespace_client", "import_lancedb", "DEFERRED"]

DEFERRED = "lance_namespace_urllib3_client"
"""The package whose `__init__` is deferred."""


class _DeferredPackage(types.ModuleType):
    """A package whose `__init__` runs at the first attribute it does not already hold."""

    def __getattr__(self, name: str) -> Any:  # only called for attributes not found
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._anchorfs_load()
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def _anchorfs_load(self) -> None:
        lock: threading.RLock = self.__dict__["_anchorfs_lock"]
        with lock:
            if self.__dict__.get("_anchorfs_loaded"):
                return
            self.__dict__["_anchorfs_loaded"] = True
            spec = self.__spec__
            assert spec is not None and spec.loader is not None
            spec.loader.exec_module(self)  # the real __init__, in this very module object


class _Trigger:
    """A meta path finder running the deferred `__init__` before a submodule outside `models` loads."""

    def __init__(self, module: _DeferredPackage) -> None:
        self.module = module

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        prefix = DEFERRED + "."
        if fullname.startswith(prefix) and not self.module.__dict__.get("_anchorfs_loaded"):
            rest = fullname[len(prefix):]
            if rest != "models" and not rest.startswith("models."):
                self.module._anchorfs_load()
        return None  # the usual finders import it

    def invalidate_caches(self) -> None:
        pass


def defer_namespace_client() -> bool:
    """Install the stand-in unless the package is imported or missing; returns whether it was."""
    if DEFERRED in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(DEFERRED)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = _DeferredPackage(DEFERRED)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = DEFERRED
    module.__dict__["_anchorfs_lock"] = threading.RLock()
    module.__dict__["_anchorfs_loaded"] = False
    if sys.modules.setdefault(DEFERRED, module) is not module:
        return False
    sys.meta_path.insert(0, _Trigger(module))  # type: ignore[arg-type]
    return True


def _mark_override(method: Any = None, **_: Any) -> Any:
    """`overrides.override` without its checks: the flag `EnforceOverrides` reads, nothing else."""
    if method is None:
        return _mark_override
    method.__override__ = True
    return method


def import_lancedb() -> Any:
    """`import lancedb`, the namespace client deferred and, on Python < 3.12, the costly `overrides`
    decorator reduced to the flag it sets while LanceDB's classes are defined."""
    defer_namespace_client()
    if "lancedb" in sys.modules or sys.version_info >= (3, 12):
        import lancedb

        return lancedb
    try:
        import overrides
    except ImportError:
        import lancedb

        return lancedb
    saved = overrides.override, getattr(overrides, "overrides", None)
    overrides.override = _mark_override  # type: ignore[assignment]
    if saved[1] is not None:
        overrides.overrides = _mark_override  # type: ignore[attr-defined]
    try:
        import lancedb
    finally:
        overrides.override = saved[0]  # type: ignore[assignment]
        if saved[1] is not None:
            overrides.overrides = saved[1]  # type: ignore[attr-defined]
    return lancedb
