"""Recipes written by tdsched (tune's recipes, a sweep's frozen recipes and shape tables)
as YAML people read: mappings of scalars on one line, lists of mappings as blocks, and
multi-line text (a kernel match's ``body``) as a literal block, line for line."""

from __future__ import annotations

from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` writing multi-line strings in literal block style."""


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _text)


def recipe_yaml(document: Any, width: int = 80) -> str:
    """``document`` as YAML, keys in their order (see the module docstring). A mapping
    holding multi-line text is written as a block, so the text can be."""
    return yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=width
    )
