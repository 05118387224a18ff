"""The ``flexamem`` command line: demo, bench and the subcommands other packages add."""
