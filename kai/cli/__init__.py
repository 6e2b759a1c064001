"""The `kai` command line: thin adapters that parse arguments and call the engine or the operator."""
