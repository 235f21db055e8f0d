"""A two-conv model for `tdsched lower net.py` (docs/commands/lower.md)."""

from tdsched.recipes.models import Model


def model(width=8):
    m = Model("net", input_shape=(1, 4, 8, 8), seed=1)
    x = m.conv2d(m.input, width, kernel=3, padding=1, name="c1")
    x = m.relu(x, name="c1.relu")
    y = m.conv2d(x, width, kernel=3, padding=1, name="c2")
    m.output(m.add(x, y, name="sum"))
    return m
