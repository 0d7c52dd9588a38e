"""Where the installed sglang is: the one answer every reader uses (patching, restore, the trace, preflight).

Found without importing sglang (importing it takes seconds and pulls in torch): the import system's spec names
the folder, and pip's metadata names the version.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sysconfig
from pathlib import Path
from typing import Optional

from eagle3lab.errors import PatchError

PACKAGE = "sglang"


def installed_root() -> Path:
    """The site-packages folder holding the ``sglang`` this Python would import (not imported here)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve().parent
    purelib = Path(sysconfig.get_paths()["purelib"])
    if (purelib / PACKAGE).is_dir():
        return purelib
    raise PatchError("sglang is not installed in this Python; install sglang==0.5.9 or pass site_packages",
                     problem="not_installed")


def site_packages_root(site_packages: str | os.PathLike | None = None) -> Path:
    """The site-packages folder to work on: the given one (checked), else the installed sglang's."""
    if site_packages is None:
        return installed_root()
    root = Path(site_packages).resolve()
    if not root.is_dir():
        raise PatchError(f"{site_packages} is not a directory; pass the site-packages folder that holds sglang/",
                         path=root, problem="not_a_directory")
    return root


def package_dir(site_packages: str | os.PathLike | None = None) -> Path:
    """The ``sglang`` package folder itself."""
    return site_packages_root(site_packages) / PACKAGE


def installed_version() -> Optional[str]:
    """The installed sglang's version from pip's metadata, or None when it is not installed."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
