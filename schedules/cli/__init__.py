"""The ``tdsched`` command line, the top layer: ``main`` builds the parser and dispatches;
each command has a module of its own (``*_command``) that parses its options, turns the
argparse Namespace into the typed request of the layer below, and prints the outcome;
``args`` holds the shared option types, ``output_paths`` the checks of files a command
reads and writes. Nothing below ``cli`` sees an argparse Namespace."""
