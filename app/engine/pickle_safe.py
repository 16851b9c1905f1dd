"""Lazy module ``__getattr__`` hooks made safe for pickle before vLLM forks its engine core.

On a GPU vLLM forks its engine-core process, which inherits every module this app imported. torch inductor builds
its compile-cache key by pickling, and for an object without ``__module__`` pickle's ``whichmodule`` looks the
name up in every module of ``sys.modules``, expecting AttributeError for a missing one. Chainlit's lazy
``__getattr__`` (``chainlit/utils.py`` ``make_module_getattr``) raises KeyError, which stops that scan, and
the compiled engine never starts. Reproduce with
``python -c "import chainlit, pickle; X = type('X', (), {}); X.__module__ = None; pickle.whichmodule(X, 'torch')"``
(``KeyError: 'torch'``). When that prints ``__main__`` instead, Chainlit is fixed and the wrapper can go;
until then every loaded module's hook is wrapped, Chainlit's and any other's, just before the engine starts.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

_WRAPPED = "__ernie_chat_pickle_safe__"  # marks a wrapper, so a second call leaves it as it is


def _attribute_error_only(module_name: str, lookup: Callable[[str], Any]) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        try:
            return lookup(name)
        except AttributeError:
            raise
        except Exception as err:  # the cause stays attached: a real import failure is still readable
            raise AttributeError(f"module {module_name!r} has no attribute {name!r} "
                                 f"(its __getattr__ raised {type(err).__name__}: {err})") from err

    setattr(__getattr__, _WRAPPED, True)
    return __getattr__


def make_module_getattrs_pickle_safe() -> list[str]:
    """Wrap the ``__getattr__`` of every module loaded now; returns the names of the modules changed."""
    changed = []
    for name, module in list(sys.modules.items()):
        if not isinstance(module, ModuleType):
            continue
        lookup = vars(module).get("__getattr__")
        if callable(lookup) and not getattr(lookup, _WRAPPED, False):
            vars(module)["__getattr__"] = _attribute_error_only(name, lookup)
            changed.append(name)
    return changed
