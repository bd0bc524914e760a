"""The SXM's ``ARGMAX`` (``TileConfig.sxm_argmax``) and ``SETB`` (``TileConfig.sxm_setb``) in
Amaranth's simulator, against the golden model's statement of them
(``archmodel.argmax_step``, ``index_vector``, ``setb_offset``) and the ISA's latencies.

* ARGMAX: searches of several accumulator vectors back to back, on tiles of 4, 12 (a
  comparison tree of uneven levels) and 16 lanes: random int32 lanes, ties inside a vector
  and across vectors (the lower index wins), the int32 extremes, FIRST starting a new search
  in the middle.  Every result is compared on the cycle ``SXM_LATENCY`` after its issue.
* SETB: the write the SXM hands the tile (register, offset: lanes 0..3 shifted, cut to
  ``BASE_OFFSET_BITS``) on its issue cycle, and nothing on other cycles.
* Both opcodes are illegal in an SXM queue of a tile built without their field.
"""

import numpy as np
import pytest

from firmware_gen.golden.archmodel import argmax_step, index_vector, setb_offset, to_planes
from lpu_arch import TileConfig, isa
from lpu_arch.isa import EAST, WEST, ArgmaxFlag, Instr, Op

from tests.hdl.test_units import KIND_OPS, fmt, run_queue, simulate, vec

ARGMAX_TILES = {"tiny": TileConfig.tiny(), "lanes12": TileConfig(lanes=12), "default": TileConfig()}


def searches(cfg, seed):
    """(instruction, int32 lanes) of three searches, the second and third started by FIRST."""
    rng = np.random.default_rng(seed)
    L, lo, hi = cfg.lanes, -(1 << 31), (1 << 31) - 1
    vectors = [rng.integers(lo, hi, L, endpoint=True) for _ in range(9)]
    vectors[1][[2, 5 % L]] = vectors[1].max() + 1                 # a tie inside a vector: the lower lane
    vectors[2][:] = vectors[1].max()                               # a tie with the running maximum: kept
    vectors[4][:] = lo
    vectors[4][L - 1] = hi                                         # the extremes
    vectors[6][:] = lo                                             # a search of the smallest values
    out = []
    for k, v in enumerate(vectors):
        flags = ArgmaxFlag.FIRST if k in (0, 3, 6) else 0
        flags |= (ArgmaxFlag.OUT_E, ArgmaxFlag.OUT_W, ArgmaxFlag.OUT_E | ArgmaxFlag.OUT_W)[k % 3]
        out.append((Instr.argmax(0, (EAST, WEST)[k % 2], index=1000 * k + 7, out=cfg.streams - 1, flags=flags), v))
    return out


@pytest.mark.parametrize("name", list(ARGMAX_TILES))
def test_argmax_matches_the_golden_model(name):
    """Each ARGMAX of a back-to-back sequence drives, ``SXM_LATENCY`` cycles after its issue and
    on its OUT_E/OUT_W directions only, the running index the golden model's ``argmax_step``
    gives (in lanes 0..3 of stream ``out``)."""
    from hdl.units.sxm import SXM

    cfg = ARGMAX_TILES[name].with_overrides(["sxm_argmax=1"])
    sxm = SXM(cfg)
    cases = searches(cfg, 47)
    seen = {}

    async def bench(ctx):
        for j in range(len(cases) + 2):
            if j < len(cases):
                ins, v = cases[j]
                planes = to_planes(v, cfg.acc_planes)
                taps = sxm.tap.east if ins.dir == EAST else sxm.tap.west
                for s in range(cfg.streams):
                    ctx.set(taps[s], int.from_bytes(planes[s].astype(np.uint8).tobytes(), "little")
                            if s < cfg.acc_planes else 0)
            ctx.set(sxm.issue.valid, int(j < len(cases)))
            ctx.set(sxm.issue.instr.as_value(), cases[j][0].encode() if j < len(cases) else 0)
            for d, port in ((EAST, sxm.drive.east), (WEST, sxm.drive.west)):
                if ctx.get(port.mask):
                    seen.setdefault(j, []).append((d, ctx.get(port.mask), ctx.get(port.data[0])))
            await ctx.tick()

    simulate(sxm, bench)
    best = None
    for j, (ins, v) in enumerate(cases):
        best = argmax_step(best, v, ins)
        dirs = [d for d, f in ((EAST, ArgmaxFlag.OUT_E), (WEST, ArgmaxFlag.OUT_W)) if ins.aux & f]
        want = [(d, 1 << ins.operand("out"), vec(index_vector(best[1], cfg.lanes))) for d in dirs]
        got = seen.get(j + isa.SXM_LATENCY, [])
        assert got == want, (f"{name}: {ins} (issued on cycle {j}, lanes {list(v)}): expected on cycle "
                             f"{j + isa.SXM_LATENCY} (direction, mask, value) {want} (index {best[1]}); measured {got}")


@pytest.mark.parametrize("shift", [0, 3, 15])
def test_setb_hands_the_tile_its_write_on_the_issue_cycle(shift):
    """SETB's write (register, offset) is on the SXM's ``setb`` port on its issue cycle only:
    lanes 0..3 of its stream as a little-endian value, shifted, cut to the offset's bits."""
    from hdl.units.sxm import SXM

    cfg = TileConfig.tiny().with_overrides(["sxm_setb=1"])
    sxm = SXM(cfg)
    values = [0x12345, 0xFFFFFFFF, 7]
    cases = [(Instr.setb(k % cfg.streams, (EAST, WEST)[k % 2], reg=1 + k, shift=shift), v) for k, v in enumerate(values)]
    seen = []

    async def bench(ctx):
        for j in range(2 * len(cases) + 1):
            ins, v = cases[j // 2] if j % 2 == 0 and j // 2 < len(cases) else (None, 0)
            for s in range(cfg.streams):
                for taps in (sxm.tap.east, sxm.tap.west):
                    ctx.set(taps[s], 0)
            if ins is not None:
                ctx.set((sxm.tap.east if ins.dir == EAST else sxm.tap.west)[ins.stream],
                        vec(index_vector(v, cfg.lanes)) | 0xAB << 8 * isa.INDEX_BYTES)   # (lanes past 3 ignored)
            ctx.set(sxm.issue.valid, int(ins is not None))
            ctx.set(sxm.issue.instr.as_value(), ins.encode() if ins is not None else 0)
            seen.append((ctx.get(sxm.setb.we), ctx.get(sxm.setb.reg), ctx.get(sxm.setb.offset)))
            assert not ctx.get(sxm.driving), "SETB drives no stream"
            await ctx.tick()

    simulate(sxm, bench)
    want = []
    for j in range(2 * len(cases) + 1):
        if j % 2 == 0 and j // 2 < len(cases):
            ins, v = cases[j // 2]
            want.append((1, ins.operand("reg"), setb_offset(ins, index_vector(v, cfg.lanes))))
        else:
            want.append(0)
    got = [s if s[0] else 0 for s in seen]
    assert got == want, f"SETB shift {shift}: expected (we, reg, offset) per cycle {want}, measured {got}"


@pytest.mark.parametrize("op, field", [(Op.ARGMAX, "sxm_argmax"), (Op.SETB, "sxm_setb")])
@pytest.mark.parametrize("on", [0, 1])
def test_sxm_queue_executes_them_only_with_their_field(op, field, on):
    """An SXM queue issues ARGMAX (SETB) where ``sxm_argmax`` (``sxm_setb``) is 1; where it is 0
    the opcode is illegal: ``illegal`` rises and the queue halts."""
    cfg = TileConfig.tiny().with_overrides([f"{field}={on}"])
    first = KIND_OPS["SXM"]
    ins = Instr.argmax(0, EAST, index=5, out=1, flags=ArgmaxFlag.FIRST) if op == Op.ARGMAX else Instr.setb(1, EAST, reg=2)
    (tr,) = run_queue("SXM", [first, Instr.nop(2), ins.encode(), first, Instr.halt()], 12, cfg=cfg)
    if on:
        assert [i[:2] for i in tr["issues"]] == [(0, first.op), (3, op), (4, first.op)], (
            f"{field} = 1: {op.name} must issue on cycle 3, measured {fmt(tr['issues'])}")
        assert not any(tr["illegal"]), f"{field} = 1: {op.name} is legal, measured illegal {tr['illegal']}"
    else:
        assert [i[:2] for i in tr["issues"]] == [(0, first.op)], (
            f"{field} = 0: nothing may issue after the {op.name} word, measured {fmt(tr['issues'])}")
        assert tr["illegal"][-1] == 1, f"{field} = 0: {op.name} is illegal, measured {tr['illegal']}"
