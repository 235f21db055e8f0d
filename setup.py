"""Package discovery for tdsched (everything else lives in pyproject.toml).

The design card keeps the four source folders at the top of the repository, yet they install
under one namespace, ``tdsched.*``. pyproject.toml cannot add that prefix to discovered
packages, so this file finds every package below each folder (any directory with an
``__init__.py``) and maps the folder to ``tdsched.<folder>``. A new subpackage is picked up
without editing a list, for wheels and editable installs alike.

setuptools builds in a fresh temporary folder, removed when the build ends, rather than in
``build/`` of the checkout: ``pip install .`` leaves the checkout as it was, and a module
deleted from the sources cannot linger in a stale ``build/lib`` and reach a wheel.
"""

import atexit
import shutil
import tempfile

from setuptools import find_packages, setup

SOURCE_FOLDERS = ("schedules", "transform_lib", "targets", "recipes")


def tdsched_packages() -> list[str]:
    """Every package under the source folders, named as installed (``tdsched.<dotted path>``),
    and ``tdsched`` itself (folder ``tdsched/``: only ``python -m tdsched``)."""
    packages = ["tdsched"]
    for folder in SOURCE_FOLDERS:
        packages.append(f"tdsched.{folder}")
        packages += [f"tdsched.{folder}.{sub}" for sub in find_packages(folder)]
    return packages


def temporary_build_folder() -> str:
    """A new folder for setuptools' build tree, removed when this build process exits."""
    folder = tempfile.mkdtemp(prefix="tdsched-build-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


setup(
    packages=tdsched_packages(),
    package_dir={"tdsched": "tdsched", **{f"tdsched.{f}": f for f in SOURCE_FOLDERS}},
    options={"build": {"build_base": temporary_build_folder()}},
)
