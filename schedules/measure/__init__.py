"""The measurement core shared by ``run``, ``sweep``, ``regress`` and ``tune``: how an
evaluation ended (``status``: :class:`~.status.Status`, :class:`~.status.Check`), build →
check → time written once (``evaluation``), the peers a user would pick instead
(``peers``), one ``tdsched run`` (``run_report``), a crash-isolated child (``isolation``),
the machine's peak (``machine_peak``) and per-dispatch profiles (``profile_report``,
``roofline_plot``). The build's settings are :class:`..compile.build_target.BuildTarget`.
Imports the layers below it (``base`` to ``compile``), never a command."""
