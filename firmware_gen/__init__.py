"""Schedule generator (compiler), assembler and golden models for the LPU tile."""

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Python's cycle collector off while a phase allocates millions of small, acyclic
    objects (a full-size program's READs and reservations): otherwise its passes over
    the growing heap take about as long as the work.  Cyclic garbage made meanwhile is
    collected once it is back on."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
