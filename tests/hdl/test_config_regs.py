"""The configuration block of the host map: the tile reports its whole ``TileConfig``.

What is tested
--------------
* Pure Python (``lpu_arch.hostmap``): ``config_words`` lists every field of
  ``TileConfig`` in ``dataclasses.fields`` order (an optional field, ``OPTIONAL_FIELDS``,
  only where it is set) for the tiny, default and full-scale presets and a tiny tile with
  ``sxm_max``; a tile's words compared against the same configuration give no problem,
  against another one a problem per differing field naming the field and both values;
  a tile without the block, from another field list or with a different format is
  reported as such.
* The driver's check (``sim.tb.driver.TileDriver.check_config``) against a fake host bus
  that answers with another configuration's words: it raises ``ConfigMismatch`` naming
  the field, and passes with three reads when the configurations agree.
* RTL, in Amaranth's simulator: ``hdl.top.tile.Tile`` of ``TileConfig.tiny()``, of a
  variant with one C2C link and of one with ``sxm_max``; every word of the block is read through the host bus
  (``addr``/``re`` -> ``rdata``/``rvalid`` ``HOST_READ_LATENCY`` cycles later) and must
  equal the expected words, computed here from the dataclass fields and ``zlib.crc32``
  and not through ``hostmap.config_words``; ``CONFIG0``/``CONFIG1`` keep their layout.
"""

import asyncio
import dataclasses
import struct
import zlib

import pytest
from amaranth.sim import Simulator

from lpu_arch import TileConfig, hostmap
from lpu_arch.config import DTYPES, LAYOUTS
from lpu_arch.hostmap import Csr

PRESETS = {"tiny": TileConfig.tiny(), "default": TileConfig.default(), "full_scale": TileConfig.full_scale(),
           "lp30": TileConfig.lp30(), "tiny_sxm_max": dataclasses.replace(TileConfig.tiny(), sxm_max=1)}


def listed(cfg):
    """The fields ``cfg`` lists: every one, an optional one only where it is not its off value."""
    off = TileConfig.OPTIONAL_FIELDS
    return [f.name for f in dataclasses.fields(TileConfig) if f.name not in off or getattr(cfg, f.name) != off[f.name]]


def expected_block(cfg):
    """{CSR word: value} of the configuration block, stated independently of hostmap."""
    names = listed(cfg)
    vals = [getattr(cfg, n) for n in names]
    choices = {"mxm_dtype": DTYPES, "mxm_layout": LAYOUTS}
    vals = [choices[n].index(v) if isinstance(v, str) else v for n, v in zip(names, vals)]   # a text field: its choice's index
    crc = zlib.crc32(struct.pack(f"<{len(vals)}I", *vals), zlib.crc32(",".join(names).encode()))
    block = {0x20: 1, 0x21: len(names), 0x22: crc}
    block.update({0x40 + k: v for k, v in enumerate(vals)})
    block[0x40 + len(names)] = 0      # beyond CONFIG_FIELDS: reads 0
    return block


# ---- pure Python -----------------------------------------------------------------------
def test_layout():
    assert (Csr.CONFIG_VERSION, Csr.CONFIG_FIELDS, Csr.CONFIG_HASH, Csr.CONFIG_BASE) == (0x20, 0x21, 0x22, 0x40)
    assert len(dataclasses.fields(TileConfig)) <= hostmap.CONFIG_MAX_FIELDS
    # The block collides with no other CSR: the fixed ones, ILLEGAL/ADDR_FAULT (up to 8
    # words each: 256 positions, 240 MEM slices) and the BUSY/TRACE/LINK blocks above 0x100.
    fixed = {int(r) for r in Csr if r < Csr.ILLEGAL_BASE}
    block = set(range(Csr.CONFIG_VERSION, Csr.CONFIG_BASE + hostmap.CONFIG_MAX_FIELDS))
    assert not block & fixed
    assert Csr.ADDR_FAULT_BASE + 8 <= Csr.CONFIG_VERSION
    assert Csr.CONFIG_BASE + hostmap.CONFIG_MAX_FIELDS <= Csr.BUSY_BASE


@pytest.mark.parametrize("name", PRESETS)
def test_round_trip(name):
    cfg = PRESETS[name]
    words = hostmap.config_words(cfg)
    assert words == [hostmap.field_word(n, getattr(cfg, n)) for n in listed(cfg)]
    assert all(0 <= w < 1 << 32 for w in words)
    assert TileConfig(**{n: hostmap.field_value(n, w) for n, w in zip(hostmap.config_field_names(cfg), words)}) == cfg
    assert hostmap.config_mismatch(cfg, words) == []
    assert hostmap.config_mismatch(cfg, words, hostmap.config_header(cfg)) == []
    assert {int(k): v for k, v in hostmap.config_csrs(cfg).items()} == \
        {k: v for k, v in expected_block(cfg).items() if v or k < 0x40 + len(words)}


def test_presets_differ_in_hash():
    hashes = {hostmap.config_hash(c) for c in PRESETS.values()}
    assert len(hashes) == len(PRESETS)


def test_mismatch_names_field_and_values():
    prog = TileConfig.default()
    tile = dataclasses.replace(prog, mem_depth=64)
    problems = hostmap.config_mismatch(prog, hostmap.config_words(tile), hostmap.config_header(tile))
    assert problems == ["mem_depth: tile has 64, program needs 2048"]


def test_mismatch_lists_every_field():
    prog, tile = TileConfig.default(), TileConfig.tiny()
    problems = hostmap.config_mismatch(prog, hostmap.config_words(tile))
    differing = [f.name for f in dataclasses.fields(TileConfig) if getattr(prog, f.name) != getattr(tile, f.name)]
    assert [p.split(":")[0] for p in problems] == differing
    assert "lanes: tile has 4, program needs 16" in problems


def test_mismatch_header():
    cfg = TileConfig.tiny()
    words = hostmap.config_words(cfg)
    n = len(words)
    # A tile built before the block existed reads 0 everywhere.
    (p,) = hostmap.config_mismatch(cfg, [], [0, 0, 0])
    assert "no configuration block" in p
    (p,) = hostmap.config_mismatch(cfg, words, [2, n, 0])
    assert p == "configuration block format: tile has 2, host expects 1"
    # A tile from a field list with one field fewer.
    problems = hostmap.config_mismatch(cfg, words[:-1], [1, n - 1, 0])
    assert problems[0].startswith(f"number of configuration fields: tile has {n - 1}, program needs {n}")
    last = hostmap.config_field_names()[-1]
    v = getattr(cfg, last)
    assert problems[1] == f"{last}: tile does not report it, program needs {repr(v) if isinstance(v, str) else v}"
    # Same values, another field list (names or order): only the hash tells.
    (p,) = hostmap.config_mismatch(cfg, words, [1, n, hostmap.config_hash(cfg) ^ 1])
    assert p.startswith("configuration hash:")


# ---- the driver's check, against a fake host bus ---------------------------------------
class FakeBus:
    """Answers host reads from a tile built from ``cfg``; counts them."""

    def __init__(self, cfg):
        self.regs = {hostmap.csr(k): v for k, v in hostmap.config_csrs(cfg).items()}
        self.reads = 0

    async def read_words(self, addrs):
        addrs = list(addrs)
        self.reads += len(addrs)
        return [self.regs.get(a, 0) for a in addrs]


def _driver(tile_cfg, prog_cfg):
    pytest.importorskip("cocotb")
    from sim.tb.driver import TileDriver
    drv = TileDriver.__new__(TileDriver)     # no DUT: only the check's read path
    drv.cfg, drv.config_checked = prog_cfg, False
    bus = FakeBus(tile_cfg)
    drv.read_words = bus.read_words
    return drv, bus


def test_driver_check_passes_in_three_reads():
    drv, bus = _driver(TileConfig.tiny(), TileConfig.tiny())
    asyncio.run(drv.check_config())
    assert drv.config_checked and bus.reads == 3


def test_driver_check_raises_naming_fields():
    from sim.tb.driver import ConfigMismatch
    prog = TileConfig.tiny()
    tile = dataclasses.replace(prog, mem_depth=128, links=1)
    drv, _ = _driver(tile, prog)
    with pytest.raises(ConfigMismatch) as e:
        asyncio.run(drv.check_config())
    assert e.value.problems == ["mem_depth: tile has 128, program needs 64", "links: tile has 1, program needs 0"]
    assert "mem_depth: tile has 128, program needs 64; links: tile has 1, program needs 0" in str(e.value)
    assert not drv.config_checked


def test_driver_load_checks_first():
    """A load on a mismatching tile raises before writing anything."""
    from sim.tb.driver import ConfigMismatch
    prog = TileConfig.tiny()
    drv, _ = _driver(dataclasses.replace(prog, lanes=8), prog)
    writes = []

    async def write_words(items):
        writes.extend(items)
    drv.write_words = write_words
    with pytest.raises(ConfigMismatch, match="lanes: tile has 8, program needs 4"):
        asyncio.run(drv.load_program({"MEM_W0": [0]}))
    assert writes == []


# ---- RTL: read the block through the tile's host bus ----------------------------------
def read_csrs(dut, regs, domains=()):
    """Read CSR words ``regs`` pipelined (one ``re`` per cycle); return their values."""
    out, first = [], []

    async def bench(ctx):
        addrs = [hostmap.csr(r) for r in regs]
        for t, a in enumerate(addrs + [None] * hostmap.HOST_READ_LATENCY):
            ctx.set(dut.host.re, a is not None)
            if a is not None:
                ctx.set(dut.host.addr, a)
            await ctx.tick()
            if ctx.get(dut.host.rvalid):
                first.append(t + 1)
                out.append(ctx.get(dut.host.rdata))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for d in domains:
        sim.add_clock(1e-6, domain=d)
    sim.add_testbench(bench)
    sim.run()
    assert first[0] == hostmap.HOST_READ_LATENCY
    return out


@pytest.mark.parametrize("links, sxm_max", [(0, 0), (1, 0), (0, 1)])
def test_tile_reports_config(links, sxm_max):
    from hdl.top.tile import Tile
    cfg = dataclasses.replace(TileConfig.tiny(), links=links, sxm_max=sxm_max)
    dut = Tile(cfg)
    block = expected_block(cfg)
    config01 = {Csr.CONFIG0: cfg.lanes | cfg.streams << 16,
                Csr.CONFIG1: (cfg.mem_slices | (cfg.mem_depth.bit_length() - 1) << 8
                              | (cfg.iq_depth.bit_length() - 1) << 16 | cfg.trace_depth.bit_length() << 24)}
    regs = list(block) + list(config01)
    names = listed(cfg)
    label = {0x20: "CONFIG_VERSION", 0x21: "CONFIG_FIELDS", 0x22: "CONFIG_HASH", 0x40 + len(names): "unused",
             Csr.CONFIG0: "CONFIG0", Csr.CONFIG1: "CONFIG1", **{0x40 + k: n for k, n in enumerate(names)}}
    # A tile with links has a receive clock domain per link (the peer's clock).
    got = read_csrs(dut, regs, domains=[f"rx{lk}" for lk in range(links)])
    assert {label[r]: v for r, v in zip(regs, got)} == {label[r]: v for r, v in {**block, **config01}.items()}


def test_start_write_to_cycle_0():
    """A Ctrl.START write on cycle w: the tile runs from cycle w + hostmap.START_CYCLES on
    (its cycle 0, the first cycle ``running`` reads high), the figure the bench adds per run."""
    from hdl.top.tile import Tile
    dut = Tile(TileConfig.tiny())
    seen = []

    async def bench(ctx):
        ctx.set(dut.host.we, 1)
        ctx.set(dut.host.addr, hostmap.csr(Csr.CTRL))
        ctx.set(dut.host.wdata, int(hostmap.Ctrl.START))
        for _ in range(2 * hostmap.START_CYCLES + 2):
            seen.append(ctx.get(dut.running))
            await ctx.tick()
            ctx.set(dut.host.we, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen.index(1) == hostmap.START_CYCLES
