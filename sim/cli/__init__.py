"""The ``lpu`` command line (``main``): a module per subcommand, each with
``add_parser(sub)`` and ``run(args)``; ``options`` and ``common`` hold what they share."""
