"""Shipped recipes (YAML and Python) and the workloads they schedule."""

from pathlib import Path

RECIPES_DIR = Path(__file__).resolve().parent
"""Directory holding the shipped recipe files."""
