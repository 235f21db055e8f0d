"""``python -m tdsched.bench BUNDLE [--out RESULTS.json]``: check and time a bench bundle's
builds on this machine's device (:mod:`tdsched.targets.bench_runner`; a bundle also
carries the runner itself: ``python BUNDLE/bench.py``)."""

import sys

from tdsched.targets.bench_runner import main

sys.exit(main())
