"""The chip-to-chip link hardware, one concept a module (``docs/c2c.md`` describes the
mechanism; the flit format, the error code and the timing budget are in ``lpu_arch/c2c.py``).

Every unit here runs on its tile's clock ("sync") and is *not* stalled by DESKEW (the tile
core is): the HAC keeps counting and flits keep flowing while the program waits.

* ``ecc.py``: the SECDED encoder and decoder of a flit (``docs/c2c.md`` "Flit format").
* ``flit.py``: a flit's fields as the hardware cuts them (``flit_field``) and the layout
  of a flit without its valid bit (``flit_body_layout``), the receive chain's payload.
* ``tx.py``: ``LinkTx``, a vector as ``flits_per_vector`` DATA flits from the cycle after
  SEND, control flits (SYNC, PROBE, ECHO) when idle ("Hardware").
* The receive chain ("Hardware", LinkRx), stages on ``stream.Signature``\\ s that never
  stall: ``elastic.py`` (``ElasticBuffer``, the clock crossing) -> ``flit_decoder.py``
  (``FlitDecoder``, SECDED and the split into data and control) -> ``assembler.py``
  (``VectorAssembler``, DATA flits to vectors) -> ``receive_buffer.py`` (``ReceiveBuffer``
  on its ``VectorFifo``, the vectors RECV pops); ``rx.py`` (``LinkRx``) composes them.
* ``hac.py``: ``HacUnit``, the hardware-aligned counter and its PROBE/ECHO/SYNC protocol
  ("The HAC").
* ``deskew.py``: ``DeskewUnit``, the bounded stalls of DESKEW and RUNTIME_DESKEW ("SAC
  time: start, DESKEW, RUNTIME_DESKEW").

The core's side of the links, the C2C slices that execute SEND, RECV and the deskew
instructions, is a slice like the others: ``hdl/units/c2c_slice.py``.
"""
