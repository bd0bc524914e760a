"""ISA, configuration, assembler and disassembler: round trips and clear errors."""

import numpy as np
import pytest

from lpu_arch import ConfigError, TileConfig
from lpu_arch.isa import COUNT_MAX, FLAGS, NO_STREAM_OPS, OPERANDS, STREAM_BITS, Instr, IsaError, Op, VopFlag
from firmware_gen.program import Program, ProgramError


@pytest.mark.parametrize("kwargs, words", [
    (dict(lanes=0), "lanes must be at least 4"),
    (dict(lanes=6), "multiple of 4"),
    (dict(streams=0), "streams per direction must be in 1..128"),
    (dict(mem_slices=0), "mem_slices per hemisphere must be in 1..120"),
    (dict(mem_slices=500), "mem_slices per hemisphere must be in 1..120"),
    (dict(mem_depth=100), "mem_depth must be a power of two"),
    (dict(iq_depth=3), "iq_depth must be a power of two"),
    (dict(lanes=16.0), "lanes must be an integer"),
    (dict(streams=2), "streams per direction must be at least 4"),
    (dict(mxm_acc_depth=2048), "mxm_acc_depth must be a power of two in 2..1024"),
    (dict(vxm_param_depth=3), "vxm_param_depth must be a power of two"),
])
def test_bad_config(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        TileConfig(**kwargs)


def test_presets_and_positions():
    cfg = TileConfig.default()
    assert cfg.slice_names == ["MXM_W", "SXM_W", "MEM_W3", "MEM_W2", "MEM_W1", "MEM_W0", "VXM",
                               "MEM_E0", "MEM_E1", "MEM_E2", "MEM_E3", "SXM_E", "MXM_E"]
    assert cfg.position("VXM") == cfg.vxm_position
    with pytest.raises(ConfigError, match="unknown configuration preset"):
        TileConfig.preset("huge")
    with pytest.raises(ConfigError, match="no slice or queue named 'MEM_X'"):
        cfg.position("MEM_X")
    TileConfig.full_scale()


def test_encode_decode_round_trip():
    rng = np.random.default_rng(0)
    for _ in range(500):
        op = Op(int(rng.integers(1, len(Op))))
        if op == Op.NOP:
            i = Instr.nop(int(rng.integers(1, COUNT_MAX + 1)))
        elif op == Op.REPEAT:
            i = Instr.repeat(int(rng.integers(1, COUNT_MAX + 1)), int(rng.integers(1, 256)),
                             int(rng.integers(-(1 << 19), 1 << 19)))
        elif op in OPERANDS:
            ops = {n: int(rng.integers(op == Op.LW and n == "n", 1 << w)) for n, (_, _, w) in OPERANDS[op].items()}
            flags = int(rng.integers(0, sum(FLAGS[op]) + 1)) & int(sum(FLAGS[op])) if op in FLAGS else 0
            if op == Op.VOP and flags & VopFlag.GATE:
                flags &= ~VopFlag.ADD           # ADD and GATE exclude each other
            st, d = (0, 0) if op in NO_STREAM_OPS else (int(rng.integers(0, 1 << STREAM_BITS)), int(rng.integers(0, 2)))
            i = Instr.compute(op, st, d, flags=flags, **ops)
            assert all(i.operand(n) == v for n, v in ops.items())
        else:
            i = Instr(op, stream=int(rng.integers(0, 1 << STREAM_BITS)), dir=int(rng.integers(0, 2)),
                      addr=int(rng.integers(0, 1 << 20))).checked()
        assert Instr.decode(i.encode()) == i
        assert Instr.parse(str(i)) == i


def test_unknown_opcode_in_image_is_named():
    cfg = TileConfig.tiny()
    with pytest.raises(IsaError, match=r"unknown opcode 45 .* at MEM_E0 word 1"):
        Program.from_images(cfg, {"MEM_E0": [Instr.nop(3).encode(), 45, 0]})
    with pytest.raises(ProgramError, match="has no HALT"):
        Program.from_images(cfg, {"MEM_E0": [Instr.nop(3).encode()]})


@pytest.mark.parametrize("text, words", [
    ("[MEM_E0]\nREAD E0, 64", "address 64 is beyond MEM_E0's depth of 64"),
    ("[MEM_E0]\nREAD E5, 1", "stream 5 does not exist"),
    ("[VXM]\nREAD E0, 1", "READ is not an instruction of a VXM slice"),
    ("[MEM_E0]\nREPEAT 3, 1, 1", "REPEAT with no earlier data instruction"),
    ("[MEM_E0]\nREAD E0, 62\nREPEAT 3, 1, +1", r"repetition 2 .*address 64 is beyond MEM_E0's depth"),
    ("[MXL_W]\nLW W0, n=5", "n = 5 rows per cycle; a block has 4 rows"),
    ("[MXL_W]\nLW W2, n=4", "LW reads streams 2..5; the tile has 4"),
    ("[MXL_W]\nLW W0, n=4, rows=3", r"LW loads rows = 3 rows; this tile's MXM loads whole blocks only "
                                    r"\(mxm_partial_lw = 0: rows must be 0\)"),
    ("[MXM_W]\nLW W0, n=4", r"LW is not an instruction of a MXM slice \(LW and LX issue from the MXM's loader queue MXL_W\)"),
    ("[MXL_E]\nMM E0, acc=0", r"MM is not an instruction of an MXM loader queue \(MM issues from the MXM's own queue MXM_E\)"),
    ("[MXM_W]\nMM W0, acc=16", "accumulator row 16 is beyond the MXM's 16"),
    ("[MXM_W]\nMM W0, slot=64, flags=XBUF", "x slot 64 is beyond the MXM's 64"),
    ("[MXM_W]\nMM W0, out=1, flags=EMIT", "EMIT drives streams 1..4"),
    ("[MXM_W]\nMM W0, flags=TABLE", "unknown MM flag 'TABLE'"),
    ("[MXM_W]\nMM W0, bogus=1", "MM has no operand 'bogus'"),
    ("[VXM]\nVOP E0, param=16", "parameter entry 16 is beyond the VXM's 16"),
    ("[VXM]\nVOP E1, param=0", "VOP reads accumulator planes on streams 1..4"),
    ("[VXM]\nVOP E0, flags=ADD|GATE", "ADD and GATE both use B"),
    ("[MEM_E0]\nMM E0, acc=0", "MM is not an instruction of a MEM slice"),
    ("[MEM_E0]\nFLY E0, 1", "unknown mnemonic 'FLY'"),
    ("[MEM_E0]\nNOP 0", "NOP count must be in 1..16383"),
    ("READ E0, 1", "before any \\[SLICE\\] header"),
    ("[MEM_Q]\nNOP 1", "no slice or queue named 'MEM_Q'"),
])
def test_assembler_errors(text, words):
    with pytest.raises((IsaError, ProgramError, ConfigError), match=words):
        Program.assemble(TileConfig.tiny(), text)


def test_queue_capacity_error():
    cfg = TileConfig.tiny()
    with pytest.raises(ProgramError, match=f"needs {cfg.iq_depth + 1} instructions .* holds {cfg.iq_depth}"):
        Program(cfg, {"MEM_E0": [Instr.nop(1)] * cfg.iq_depth}).validate()


def test_program_json_round_trip():
    cfg = TileConfig.tiny()
    p = Program.assemble(cfg, "[MEM_W1]\nREAD E1, 6\nREPEAT 4, 2, -1\n[MEM_E1]\nNOP 7\nWRITE E1, 9\n")
    p.set_memory("MEM_W1", np.arange(8 * cfg.lanes).reshape(8, cfg.lanes))
    q = Program.from_json(p.to_json())
    assert q.images() == p.images()
    assert all((q.memory[n] == p.memory[n]).all() for n in cfg.mem_names)
    assert Program.assemble(cfg, p.disassemble()).images() == p.images()
