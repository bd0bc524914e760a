"""The ``lpu`` command line: ``main`` (the entry point and the parser), one module per
subcommand (``compile``, ``sim``, ``asm``, ``show``, ``tray``, ``moe``, ``plan``, ``decode``,
``c2c``, ``bench``, ``synth``), each with ``add_parser(sub)`` and ``run(args)``, and what they
share: ``options`` (argparse types and option groups) and ``common`` (running and printing)."""
