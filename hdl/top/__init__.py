"""Top levels: the tile, several tiles in their own clock domains, the simulation top, the UART-bridged tile."""
