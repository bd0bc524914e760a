"""`python -m hdl.flows.size`: the tile as separate modules, its size figures against the
configuration, its command line, and its Verilog against the simulated tile's, cycle by
cycle on Icarus, running programs that use every kind of slice."""

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lpu_arch import TileConfig, hostmap

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from lpu_arch.hostmap import Csr, Region
from hdl.flows.size import elaborate, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny():
    cfg = dataclasses.replace(TileConfig.tiny(), trace_depth=0)
    return cfg, elaborate(cfg)


def test_figures_follow_the_configuration(tiny):
    cfg, r = tiny
    u, VB, S, P = r["units"], cfg.vector_bits, cfg.streams, cfg.positions
    n_mem = 2 * cfg.mem_slices
    assert u["MEM slice"]["instances"] == n_mem
    assert u["MEM slice"]["memory_bits"] == n_mem * cfg.mem_depth * cfg.lanes * 8
    assert u["MEM slice"]["memories"] == [{"name": "sram", "width": VB, "depth": cfg.mem_depth,
                                           "count": n_mem, "bits": n_mem * cfg.mem_depth * VB}]
    # Each MXM: lanes x lanes int8 products; both weight blocks are registers.
    assert u["MXM"]["instances"] == 2
    assert u["MXM"]["multipliers"] == 2 * cfg.lanes ** 2
    assert u["MXM"]["multiplier_kinds"][0] == {"a": "s8", "b": "s8", "product_bits": 16, "count": 2 * cfg.lanes ** 2}
    assert u["MXM"]["ff_bits"] >= 2 * 2 * cfg.lanes * VB
    mxm_mems = {m["name"]: m for m in u["MXM"]["memories"]}
    assert mxm_mems["acc"]["bits"] == 2 * cfg.mxm_acc_depth * 32 * cfg.lanes
    assert mxm_mems["xbuf"]["bits"] == 2 * cfg.mxm_xbuf_depth * VB
    # One instruction queue per position and a loader queue per MXM; the stream registers:
    # every position loads both directions except towards an edge.
    assert u["ICU"]["instances"] == P + 2 == cfg.queues
    assert u["ICU"]["memory_bits"] == (P + 2) * cfg.iq_depth * 64
    assert u["fabric"]["ff_bits"] == 2 * (P - 1) * S * VB
    assert u["SXM"]["ff_bits"] >= 2 * cfg.lanes * VB          # the transpose buffers
    assert r["total"]["memory_bits"] == sum(x["memory_bits"] for x in u.values())
    assert r["total"]["ff_bits"] == sum(x["ff_bits"] for x in u.values())
    assert r["modules"]["lpu_col_mem"]["instances"] == n_mem
    assert r["modules"][f"lpu_mxm_row_{cfg.lanes}"]["instances"] == 2 * cfg.lanes


def test_command_line(tmp_path):
    out = tmp_path / "tile.v"
    cmd = [sys.executable, "-m", "hdl.flows.size", "--config", "tiny", "--json", "--quiet", "--verilog", str(out)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["config"]["lanes"] == TileConfig.tiny().lanes and r["config"]["trace_depth"] == 0
    assert r["verilog_bytes"] == out.stat().st_size
    assert "module lpu_tile(" in out.read_text()
    p = subprocess.run([sys.executable, "-m", "hdl.flows.size", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and "--config" in p.stdout and "--verilog" in p.stdout and "--json" in p.stdout


@pytest.mark.parametrize("argv, words", [
    (["--config", "huge"], "invalid choice: 'huge'"),
    (["--config", "tiny", "--verilog", "/nonexistent-dir/x.v"], "does not exist"),
])
def test_bad_options(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert words in capsys.readouterr().err


# ---- the separate modules behave as the simulated tile, cycle by cycle -------------------------
class _Raw:
    """A program as raw instruction words (any words: both designs must agree on them)."""

    def __init__(self, cfg, images, memory, cycles):
        from firmware_gen.program import Program
        fresh = Program(cfg)
        self._images, self.memory, self.cycles = images, memory, cycles
        self.vxm_params, self.table = fresh.vxm_params, fresh.table

    def images(self):
        return self._images


def _random_program(cfg, seed, count=150):
    """Every slice issues ``count`` random instructions of its kinds (random streams,
    directions, addresses, flags, LW delays) on consecutive cycles over random MEM contents."""
    from lpu_arch.isa import FIELD, SLICE_OPS, DATA_OPS, Instr
    rng = np.random.default_rng(seed)
    images = {}
    for name in cfg.slice_names:
        ops = sorted(SLICE_OPS[cfg.kind(name)] & DATA_OPS)
        words = []
        for _ in range(count):
            f = {"op": int(rng.choice(ops)), "dir": int(rng.integers(2)), "stream": int(rng.integers(cfg.streams)),
                 "addr": int(rng.integers(cfg.mem_depth if cfg.kind(name) == "MEM" else 1 << FIELD["addr"][1])),
                 "count": int(rng.integers(1 << 16)), "delay": int(rng.integers(8)), "aux": int(rng.integers(256))}
            words.append(sum(v << FIELD[k][0] for k, v in f.items()))
        images[name] = words + [Instr.halt().encode()]
    memory = {n: rng.integers(0, 256, (cfg.mem_depth, cfg.lanes)).astype(np.uint8) for n in cfg.mem_names}
    return _Raw(cfg, images, memory, cycles=count + 64)


def _host_writes(cfg, prog):
    """(address, value) writes loading a program, its MEM images, VXM parameters and table."""
    from lpu_arch.vxm import param_words, reset_words, table_words
    items = []
    for name, words in prog.images().items():
        p = cfg.position(name)
        for i, w in enumerate(words):
            items += [(hostmap.addr(Region.IMEM, p, 2 * i), w & 0xFFFFFFFF), (hostmap.addr(Region.IMEM, p, 2 * i + 1), w >> 32)]
    for name, image in prog.memory.items():
        i = cfg.mem_names.index(name)
        for row in np.flatnonzero(image.any(axis=1)):
            vec = bytes(int(b) & 0xFF for b in image[row])
            for w in range(cfg.words_per_vector):
                items.append((hostmap.addr(Region.DMEM, i, int(row) * cfg.words_per_vector + w),
                              int.from_bytes(vec[4 * w: 4 * w + 4], "little")))
    p0, t0 = reset_words(cfg)
    for k, (a, b) in enumerate(zip(param_words(prog.vxm_params), p0)):
        if a != b:
            items.append((hostmap.addr(Region.VXM_PARAM, 0, k), a))
    for k, (a, b) in enumerate(zip(table_words(prog.table), t0)):
        if a != b:
            items.append((hostmap.addr(Region.VXM_TABLE, 0, k), a))
    return items


def _stimulus(cfg, programs):
    """One (we, re, addr, wdata) per cycle: load, start, poll STATUS, read everything back."""
    cyc = []
    for prog in programs:
        cyc += [(1, 0, a, v) for a, v in _host_writes(cfg, prog)]
        cyc.append((1, 0, hostmap.csr(Csr.CTRL), 1))
        cycles = prog.cycles if isinstance(prog, _Raw) else archmodel.run(prog).cycles
        cyc += [(0, 1, hostmap.csr(Csr.STATUS), 0)] * (cycles + 20)
        reads = [hostmap.csr(r) for r in (Csr.STATUS, Csr.SAC, Csr.CONFIG0, Csr.CONFIG1,
                                          Csr.ILLEGAL_BASE, Csr.ADDR_FAULT_BASE)]
        reads += [hostmap.csr(Csr.BUSY_BASE + p) for p in range(cfg.positions)]
        reads += [hostmap.addr(Region.DMEM, i, w) for i in range(len(cfg.mem_names))
                  for w in range(cfg.mem_depth * cfg.words_per_vector)]
        reads += [hostmap.addr(Region.IMEM, p, w) for p in range(cfg.positions) for w in range(8)]
        reads += [hostmap.addr(Region.VXM_PARAM, 0, w) for w in range(16)]
        reads += [hostmap.addr(Region.VXM_TABLE, 0, w) for w in range(0, 256, 17)]
        cyc += [(0, 1, a, 0) for a in reads]
    return cyc


TB = """`timescale 1ns/1ps
module tb;
  reg clk = 0, rst = 1, we = 0, re = 0;
  reg [31:0] addr = 0, wdata = 0;
  wire [31:0] rdata_a, rdata_b;
  wire rvalid_a, rvalid_b, running_a, running_b, done_a, done_b, fault_a, fault_b;
  lpu_tile_flat a(.clk(clk), .rst(rst), .host__addr(addr), .host__wdata(wdata), .host__we(we), .host__re(re),
                  .host__rdata(rdata_a), .host__rvalid(rvalid_a), .running(running_a), .done(done_a), .fault(fault_a));
  lpu_tile b(.clk(clk), .rst(rst), .host__addr(addr), .host__wdata(wdata), .host__we(we), .host__re(re),
             .host__rdata(rdata_b), .host__rvalid(rvalid_b), .running(running_b), .done(done_b), .fault(fault_b));
  reg [65:0] stim [0:NCYC-1];
  integer i, errors = 0, reads = 0;
  always #5 clk = ~clk;
  always @(negedge clk) if (!rst) begin
    if ({rdata_a, rvalid_a, running_a, done_a, fault_a} !== {rdata_b, rvalid_b, running_b, done_b, fault_b}) begin
      errors = errors + 1;
      if (errors < 10) $display("MISMATCH at %0t: %h %b%b%b%b vs %h %b%b%b%b", $time,
        rdata_a, rvalid_a, running_a, done_a, fault_a, rdata_b, rvalid_b, running_b, done_b, fault_b);
    end
    if (rvalid_a) reads = reads + 1;
  end
  initial begin
    $readmemh("stim.hex", stim);
    repeat (3) @(posedge clk);
    @(negedge clk) rst = 0;
    for (i = 0; i < NCYC; i = i + 1) begin
      @(negedge clk);
      {we, re, addr, wdata} = stim[i];
    end
    @(negedge clk) begin we = 0; re = 0; end
    repeat (4) @(negedge clk);
    $display("RESULT errors=%0d reads=%0d done=%b running=%b fault=%b", errors, reads, done_a, running_a, fault_a);
    $finish;
  end
endmodule
"""


@pytest.mark.sim
@pytest.mark.skipif(not shutil.which("iverilog"), reason="needs Icarus Verilog")
def test_separate_modules_behave_as_the_tile(tiny, tmp_path):
    from amaranth.back import verilog

    from hdl.top.tile import Tile
    from tests.helpers import sxm_cases, sxm_program
    cfg, r = tiny
    ex = example_ffn("swiglu", 8, 8, 4, seed=1)
    ffn, _ = compile_ffn(ex.spec, ex.x_int8, cfg)
    sxm, _ = sxm_program(cfg, sxm_cases(cfg, seed=2))
    cyc = _stimulus(cfg, [ffn, sxm, _random_program(cfg, seed=3)])
    (tmp_path / "stim.hex").write_text("".join(f"{(we << 65) | (re << 64) | (a << 32) | v:017x}\n"
                                               for we, re, a, v in cyc))
    (tmp_path / "tb.v").write_text(TB.replace("NCYC", str(len(cyc))))
    (tmp_path / "flat.v").write_text(verilog.convert(Tile(cfg), name="lpu_tile_flat", emit_src=False,
                                                     strip_internal_attrs=True))
    (tmp_path / "hier.v").write_text(r["verilog"])
    subprocess.run(["iverilog", "-g2012", "-o", "sim", "-s", "tb", "tb.v", "flat.v", "hier.v"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=600)
    out = subprocess.run(["vvp", "-n", "sim"], cwd=tmp_path, capture_output=True, text=True, timeout=1200).stdout
    assert "RESULT errors=0 " in out, out[-2000:]
    reads = sum(1 for we, re, a, v in cyc if re)
    assert f"reads={reads} done=1 running=0 " in out, out[-2000:]
