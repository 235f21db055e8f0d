"""Package discovery for tdsched (everything else lives in pyproject.toml).

The design card keeps the four source folders at the top of the repository, yet they install
under one namespace, ``tdsched.*``. pyproject.toml cannot add that prefix to discovered
packages, so this file finds every package below each folder (any directory with an
``__init__.py``) and maps the folder to ``tdsched.<folder>``. A new subpackage is picked up
without editing a list, for wheels and editable installs alike.
"""

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


setup(
    packages=tdsched_packages(),
    package_dir={"tdsched": "tdsched", **{f"tdsched.{f}": f for f in SOURCE_FOLDERS}},
)
