"""A module-level __getattr__ that raises something other than AttributeError breaks pickle's module scan, which
torch.compile's cache key runs in the forked engine core: the wrapper (app/engine/pickle_safe.py) makes every such
hook pickle-safe."""
import pickle
import sys
import types

import pytest

from app.engine.pickle_safe import make_module_getattrs_pickle_safe


def module_less(name: str) -> type:
    """An object pickle must find by scanning sys.modules (no __module__), as inductor's cache key meets."""
    cls = type(name, (), {})
    cls.__module__ = None
    return cls


@pytest.fixture
def lazy_module(monkeypatch):
    """A lazy package like Chainlit's: known names import on demand, unknown ones raise KeyError."""
    module = types.ModuleType("lazy_pkg_for_test")
    registry = {"answer": 42}
    module.__getattr__ = lambda name: registry[name]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_lazy_getattr_raising_keyerror_breaks_the_scan_until_wrapped(lazy_module):
    with pytest.raises(KeyError):
        pickle.whichmodule(module_less("torch"), "torch")
    assert "lazy_pkg_for_test" in make_module_getattrs_pickle_safe()
    assert pickle.whichmodule(module_less("torch"), "torch") == "__main__"  # scanned every module, none has it


def test_known_names_still_resolve_and_unknown_ones_say_why(lazy_module):
    make_module_getattrs_pickle_safe()
    assert lazy_module.answer == 42
    with pytest.raises(AttributeError, match=r"'lazy_pkg_for_test' has no attribute 'missing' \(its __getattr__ "
                                             r"raised KeyError") as caught:
        lazy_module.missing  # noqa: B018
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_second_call_wraps_nothing_again(lazy_module):
    make_module_getattrs_pickle_safe()
    hook = vars(lazy_module)["__getattr__"]
    assert "lazy_pkg_for_test" not in make_module_getattrs_pickle_safe()
    assert vars(lazy_module)["__getattr__"] is hook


def test_chainlit_after_the_wrap_scans_cleanly_and_keeps_its_lazy_names():
    import chainlit

    make_module_getattrs_pickle_safe()
    assert pickle.whichmodule(module_less("torch"), "torch") == "__main__"
    assert chainlit.Message.__name__ == "Message"  # a lazy name, imported on first use
