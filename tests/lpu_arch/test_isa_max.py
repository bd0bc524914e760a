"""The SXM's MAX (``docs/isa.md``) and the configuration field that builds it,
``TileConfig.sxm_max``: the encoding, the text form, the optional field (listed only where
it is 1, so that no preset's configuration, programs or configuration block change), the
opcode refused on a tile without it, its stream effects, and its lane mapping in the golden
model against a plain loop over the lanes."""

import tomllib

import numpy as np
import pytest

from lpu_arch import ConfigError, TileConfig, hostmap
from lpu_arch.effects import Access, effects
from lpu_arch.isa import (EAST, FIELD, SLICE_OPS, SXM_LATENCY, WEST, Instr, IsaError, Op, SxmFlag, slice_ops,
                          used_word_mask)

from firmware_gen.golden.archmodel import sxm_apply
from firmware_gen.program import Program, ProgramError

TINY_MAX = TileConfig.tiny().with_overrides(["sxm_max=1"])


def field(word, name):
    lsb, width = FIELD[name]
    return (word >> lsb) & ((1 << width) - 1)


def test_max_encoding_and_text_round_trip():
    ins = Instr.max(5, WEST, k=9, with_=3, out=6, flags=SxmFlag.OUT_E | SxmFlag.OUT_W)
    w = ins.encode()
    # The operand table: opcode 19, k in addr[0:10], with in delay[0:7], out in count[0:7].
    assert (field(w, "op"), field(w, "dir"), field(w, "stream")) == (19, WEST, 5)
    assert (field(w, "addr"), field(w, "delay"), field(w, "count"), field(w, "aux")) == (9, 3, 6, 0b1100)
    assert str(ins) == "MAX W5, k=9, with=3, out=6, flags=OUT_E|OUT_W"
    assert Instr.parse(str(ins)) == ins == Instr.decode(w)
    assert Instr.parse("max e0, with=0, k=1023, out=127") == Instr.compute(Op.MAX, 0, EAST, k=1023, out=127,
                                                                           **{"with": 0})
    # Bits outside k, with, out and the four SXM flags must be 0.
    assert used_word_mask(Op.MAX) == (0x3F | 1 << 6 | 0x7F << 7 | 0x3FF << 14 | 0x7F << 34 | 0x7F << 48
                                      | 0xF << 56)
    for bad in (1 << (14 + 10), 1 << (34 + 7), 1 << (48 + 7), 1 << (56 + 4)):
        with pytest.raises(IsaError, match="MAX"):
            Instr.decode(w | bad)
    with pytest.raises(IsaError, match="MAX operand k must be in 0..1023"):
        Instr.parse("MAX E0, k=1024, with=0, out=0")
    with pytest.raises(IsaError, match="MAX has no operand 'map'"):
        Instr.parse("MAX E0, map=1, out=0")


def test_sxm_max_is_an_optional_field_off_in_every_preset():
    for name in TileConfig.PRESETS:
        cfg = TileConfig.preset(name)
        assert cfg.sxm_max == 0 and "sxm_max" not in cfg.to_dict(), name
        assert "sxm_max" not in hostmap.config_field_names(cfg) and "sxm_max" not in cfg.to_toml()
        assert Op.MAX not in slice_ops("SXM", cfg)
    d = TINY_MAX.to_dict()
    assert list(d)[-1] == "sxm_max" and d["sxm_max"] == 1
    assert TileConfig.from_dict(tomllib.loads(TINY_MAX.to_toml()), complete=True) == TINY_MAX
    assert TileConfig.from_dict(TileConfig.tiny().to_dict(), complete=True) == TileConfig.tiny()
    assert TINY_MAX.key() != TileConfig.tiny().key()
    assert Op.MAX in slice_ops("SXM", TINY_MAX) and Op.MAX not in SLICE_OPS["SXM"]
    assert all(Op.MAX not in slice_ops(k, TINY_MAX) for k in SLICE_OPS if k != "SXM")
    with pytest.raises(ConfigError, match="sxm_max must be 0 or 1, got 2"):
        TileConfig.tiny().with_overrides(["sxm_max=2"])


def test_the_configuration_block_names_sxm_max():
    tiny = TileConfig.tiny()
    words, header = hostmap.config_words(TINY_MAX), hostmap.config_header(TINY_MAX)
    assert len(words) == len(hostmap.config_words(tiny)) + 1 and words[-1] == 1 and header[1] == len(words)
    assert hostmap.config_mismatch(TINY_MAX, words, header) == []
    assert hostmap.config_mismatch(tiny, words, header) == [
        "sxm_max: tile has 1, program needs 0 (it does not list the field)"]
    assert hostmap.config_mismatch(TINY_MAX, hostmap.config_words(tiny), hostmap.config_header(tiny)) == [
        "sxm_max: tile has 0 (it does not list the field), program needs 1"]


def test_max_needs_sxm_max():
    text = "[SXM_W]\nMAX W0, k=1, with=1, out=2, flags=OUT_E"
    with pytest.raises(ProgramError, match=r"SXM_W\[0\] .*MAX needs sxm_max = 1; this tile is built without it"):
        Program.assemble(TileConfig.tiny(), text)
    prog = Program.assemble(TINY_MAX, text)
    assert Program.from_images(TINY_MAX, prog.images()).disassemble() == prog.disassemble()
    with pytest.raises(ProgramError, match="MAX needs sxm_max = 1"):
        Program.from_images(TileConfig.tiny(), prog.images())


@pytest.mark.parametrize("text, words", [
    ("[SXM_E]\nMAX E0, k=4, with=0, out=2, flags=OUT_W", "MAX rotates by 4 lanes; it must be below the 4 lanes"),
    ("[SXM_E]\nMAX E0, k=0, with=4, out=2, flags=OUT_W", "with stream 4 does not exist"),
    ("[SXM_E]\nMAX E0, k=0, with=0, out=4, flags=OUT_W", "output stream 4 does not exist"),
    ("[SXM_E]\nMAX E4, k=0, with=0, out=0, flags=OUT_W", "stream 4 does not exist"),
    ("[MEM_E0]\nMAX E0, k=0, with=0, out=0", "MAX is not an instruction of a MEM slice"),
    ("[SXM_E]\nMAX E0, k=0, with=0, flags=TABLE", "unknown MAX flag 'TABLE'"),
])
def test_bad_max_instructions(text, words):
    with pytest.raises((ProgramError, IsaError), match=words):
        Program.assemble(TINY_MAX, text)


def test_max_effects_read_both_streams_and_drive_out():
    ins = Instr.max(2, WEST, k=1, with_=5, out=7, flags=SxmFlag.OUT_E | SxmFlag.OUT_W)
    eff = effects(ins, "SXM_E", 16)
    assert eff.reads == (Access(WEST, 2, 0), Access(WEST, 5, 0))
    assert eff.drives == (Access(EAST, 7, SXM_LATENCY), Access(WEST, 7, SXM_LATENCY))
    same = effects(Instr.max(2, EAST, k=1, with_=2, out=0, flags=SxmFlag.OUT_E), "SXM_W", 16)
    assert same.reads == (Access(EAST, 2, 0),) and same.drives == (Access(EAST, 0, SXM_LATENCY),)


@pytest.mark.parametrize("lanes", [4, 16])
def test_golden_max_against_a_loop(lanes):
    rng = np.random.default_rng(lanes)
    for k in range(lanes):
        x, w = rng.integers(-128, 128, lanes), rng.integers(-128, 128, lanes)
        x[0], w[(k + 1) % lanes] = -128, 127
        for with_, ww in ((1, w), (0, x)):
            ins = Instr.max(0, EAST, k=k, with_=with_, out=0)
            got = sxm_apply(ins, (x & 0xFF).astype(np.uint8), (ww & 0xFF).astype(np.uint8))
            want = [max(int(x[i]), int(ww[(i + k) % lanes])) & 0xFF for i in range(lanes)]
            assert got.dtype == np.uint8 and got.tolist() == want, (ins, x.tolist(), ww.tolist())
    # Rotation reduction: k = lanes/2, .., 1 on the previous result puts the maximum in every lane.
    x = rng.integers(-128, 128, lanes)
    y = (x & 0xFF).astype(np.uint8)
    k = lanes // 2
    while k:
        y = sxm_apply(Instr.max(0, EAST, k=k, with_=0, out=0), y, y)
        k //= 2
    assert y.view(np.int8).tolist() == [int(x.max())] * lanes
