"""The ``lpu`` command line."""
