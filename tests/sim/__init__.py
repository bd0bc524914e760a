"""Tests of the flows, the ``lpu`` command, the harness and the bench, on the RTL simulators where they run."""
