"""Tests of the compiler, the static checker, the golden models and the host-side model code (no simulator)."""
