"""Flows: each compiles, runs on the golden model or the RTL, checks and returns one report (FFN, copy, C2C, tray, MoE, decode)."""
