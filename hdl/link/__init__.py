"""The chip-to-chip link: its error code, transmitter, receive chain, HAC and deskew."""
