"""``package.module:name`` references: the form checked without importing, the import naming its key."""

from __future__ import annotations

import sys

import pytest

from rlpipe.config import ConfigError
from rlpipe.config.references import check_form, import_module, import_reference


@pytest.mark.parametrize("spec", ["os:system", "rlpipe.envs.tasks.symmetry:cartpole_mirror", "_a._b:_c1"])
def test_the_form_is_accepted_without_importing(spec, monkeypatch):
    monkeypatch.delitem(sys.modules, "_a", raising=False)
    assert check_form(spec) == spec and "_a" not in sys.modules


@pytest.mark.parametrize("spec", ["mirror", "mod:", ":fn", "a..b:f", "a/b:f", "a:b.c", "1a:f", "a:f g"])
def test_other_forms_are_refused(spec):
    with pytest.raises(ValueError, match=r"^expected package\.module:function \(got "):
        check_form(spec)


def test_a_missing_module_says_where_it_was_looked_for(tmp_path):
    (tmp_path / "needs_missing.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(ConfigError) as info:
        import_module("no_such_pkg.sub", "some.key")
    assert str(info.value) == (
        "some.key: cannot import module 'no_such_pkg.sub' (ModuleNotFoundError: No module named "
        "'no_such_pkg'); it is imported from the installed packages and PYTHONPATH, never the working "
        "directory: install its package or add its folder to PYTHONPATH"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ConfigError, match=r"No module named 'not_a_module_anywhere'\)$"):
            import_module("needs_missing", "some.key")  # the module is there; what it imports is not
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("needs_missing", None)
    assert import_reference("os.path:join", "k") is __import__("os").path.join
    assert import_reference("os.path:no_such_name", "k") is None
