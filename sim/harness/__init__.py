"""The build-and-run harness: the cocotb runner wrapper, the Icarus rewrite, waves, progress, compiled directories, the scoreboard."""
