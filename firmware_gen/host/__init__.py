"""The host side: model descriptions, weights files, the small decoder and the LP30-scale planner."""
