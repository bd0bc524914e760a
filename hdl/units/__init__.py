"""Slice units and what every fabric position is built of: stream registers, instruction queue, MEM, MXM, VXM, SXM, event trace."""
