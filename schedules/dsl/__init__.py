"""The recipe model, free of any front end and of IREE: steps and their typed options
(``steps``, ``options``, ``values``), the recipe (``recipe``), parameters and their
substitution (``params``, ``space``, ``constraints``), ``when`` conditions (``when``,
``conditions``, ``build_names``), shape tables (``shape_table``), layer selection
(``layers``, ``match_keys``), resolved fields (``resolved``) and the primitives' generated
option tables (``step_docs``). Imports ``base`` only."""
