"""The chip-to-chip link hardware, one concept a module (``docs/c2c.md`` describes the
mechanism; the flit format, the error code and the timing budget are in ``lpu_arch/c2c.py``).

Every unit here runs on its tile's clock ("sync") and is *not* stalled by DESKEW (the tile
core is): the HAC keeps counting and flits keep flowing while the program waits.

A link is ``LinkTx`` (``tx.py``, with ``ecc.py`` and ``flit.py``) and ``LinkRx`` (``rx.py``),
the receive chain of stages that never stall: ``ElasticBuffer`` (the clock crossing) ->
``FlitDecoder`` (SECDED, data and control apart) -> ``VectorAssembler`` (DATA flits to
vectors) -> ``ReceiveBuffer`` (the vectors RECV pops).  ``hac.py`` keeps the
hardware-aligned counter, ``deskew.py`` the bounded stalls of DESKEW and RUNTIME_DESKEW;
the core's side of the links is a slice like the others: ``hdl/units/c2c_slice.py``.
"""
