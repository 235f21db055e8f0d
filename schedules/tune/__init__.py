"""``tdsched tune`` and ``tdsched tasks``: a model's tasks, each tuned within one time
budget, and one recipe for the whole model.

Modules: ``command`` (the ``tune`` command), ``tasks_command`` (the ``tasks`` command),
``tasks`` (a model's tasks, weighed by a profile), ``task_workloads`` (a task as a
workload of its own), ``task_match`` (a task's kernel match in the model), ``templates``,
``templates_rows``, ``templates_vulkan`` (a task's template recipe), ``scheduler`` (the
budget loop, :func:`~.scheduler.tune`), ``state`` (the state between runs), ``races``
(the whole-model races), ``blame`` (the schedules to blame for a wrong model),
``plot`` (the chart).
"""
