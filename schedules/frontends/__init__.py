"""The two front ends of the one recipe model: YAML files (``yaml_frontend``,
``yaml_nodes``; ``yaml_writer`` writes recipes back), the typed Python API
(``python_api``), loading by file or shipped name (``loading``), what a recipe file may make
tdsched do (``recipe_trust``) and the JSON Schema of recipe files (``schema``). Imports
``base`` and ``dsl``."""
