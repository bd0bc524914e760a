"""Tool flows on the HDL: ECP5 synthesis and size reports."""
