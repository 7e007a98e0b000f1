"""The ``phalanx`` command line: one module per command group."""
