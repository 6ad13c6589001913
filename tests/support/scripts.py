"""Load a repository script that is not part of a package (``benchmarks/scale.py``,
``hack/demo/driver.py``) as a module, so a unit test can call its functions without running it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_script(path: Path) -> ModuleType:
    """The script at ``path`` executed as a fresh module named after its file stem.

    Each call executes the script again (a test may monkeypatch its module without affecting
    another); the module is not registered in ``sys.modules``. Raises ``FileNotFoundError`` when
    ``path`` does not exist and whatever the script raises at import.
    """
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, f"{path} is not a loadable Python file"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
