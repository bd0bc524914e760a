"""``make bench``: the measurements, their tables and their history."""
