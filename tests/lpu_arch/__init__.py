"""Tests of the architecture's statements: the ISA's encoding and the assembler's round trips."""
