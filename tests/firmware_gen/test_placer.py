"""The attention step's and token loop's placer (``compiler/attention_place.py``): a group lands on
its earliest free cycle, and a slot or accumulator row is written again only after the reads
placed before it (a vector placed later in the program may not overwrite one still to be read)."""

from firmware_gen.compiler.attention_place import Placer
from firmware_gen.compiler.tile_state import TileState
from lpu_arch.config import TileConfig

CFG = TileConfig()


def test_an_lx_waits_for_the_mm_that_reads_its_slot():
    pl = Placer(TileState(CFG))
    pl.lx("MXM_W", "MEM_W0", 0, 5, 0, "x into slot 5")
    t_mm = pl.mm("MXM_W", 5, 3, 0, 40, "the MM that reads slot 5")
    t = pl.lx("MXM_W", "MEM_W0", 1, 5, 0, "the next x into slot 5")        # its LX's cycle
    assert t > t_mm
    free = pl.lx("MXM_W", "MEM_W0", 2, 6, 0, "another slot")
    assert free < t_mm, "a slot nothing reads is not held back"


def test_an_mm_without_acc_waits_for_the_emit_of_its_row():
    pl = Placer(TileState(CFG))
    pl.lx("MXM_W", "MEM_W0", 0, 5, 0, "x into slot 5")
    pl.mm("MXM_W", 5, 3, 0, 0, "a sum into row 3")
    t_emit = pl.place([pl.flush("MXM_W", 3, 0)], 60, "row 3 read out")
    assert pl.mm("MXM_W", 5, 3, 0, 0, "a new sum into row 3") > t_emit
    assert pl.mm("MXM_W", 5, 4, 0, 0, "a sum into row 4") < t_emit
