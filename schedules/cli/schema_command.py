"""``tdsched schema``: print the JSON Schema of recipe files (or, with ``--baseline``, of
``tdsched regress`` baseline files), for editors and CI linting."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..base.files import write_atomically
from ..frontends.schema import recipe_schema
from ..regress.baseline_schema import baseline_schema
from .output_paths import writes


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of recipe (or baseline) files, for editors and checks",
        description="Print the JSON Schema (draft 2020-12) of YAML recipe files, generated "
        "from the same step registry and field tables that validate recipes when they load. "
        "Point an editor at it (docs/commands/schema.md) to complete primitives and options "
        "and flag unknown keys as you type. The schema checks shapes only: tdsched itself "
        "still checks tile sizes against the payload, handles, and parameter values. "
        "--baseline prints the schema of 'tdsched regress' baseline files instead.",
    )
    output = p.add_argument(
        "-o", "--output", type=Path, help="write to this file instead of stdout"
    )
    writes(p, output)
    p.add_argument(
        "--baseline",
        action="store_true",
        help="the schema of regress baseline files (entries, settings), not of recipes",
    )


def run(args: argparse.Namespace) -> int:
    schema = baseline_schema() if args.baseline else recipe_schema()
    text = json.dumps(schema, indent=2) + "\n"
    if args.output is None:
        print(text, end="")
    else:
        write_atomically(args.output, text.encode())
    return 0
