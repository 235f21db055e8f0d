"""``tdsched tune`` and ``tdsched tasks``: a model's tasks, each swept within one time
budget, and one recipe for the whole model that takes each task's winning schedule.

The commands are ``cli.tune_command`` and ``cli.tasks_command``. Modules: ``tasks`` (a
model's tasks, weighed by a profile), ``task_workloads`` (a task as a workload of its
own), ``task_match`` (a task's kernel match in the model), ``templates``,
``templates_rows``, ``templates_vulkan`` (a task's template), ``prepare`` (a task's
workload and template recipe), ``tuning`` (the options, a task's standing, the
thresholds), ``scheduler`` (the budget loop, :func:`~.scheduler.tune`), ``progress`` (its
lines), ``model_recipe`` (the recipe written for the model), ``outcome`` (what a tune
did), ``state`` (the state between runs), ``races`` (the whole-model races), ``blame``
(the schedules to blame for a wrong model), ``plot`` (the chart).
"""
