"""The Verilog the Icarus builds simulate: the same design, written for an event-driven
simulator.

Icarus runs each ``always`` block as a thread, and every signal an ``always`` block reads
costs it a type check (``vvp``'s ``%load/vec4``).  Amaranth's Verilog (``amaranth.back.verilog``)
gives every flip-flop its own ``always @(posedge clk)`` block: the default tile has about
1,600 of them, each woken on every clock edge.  :func:`convert` writes the same RTLIL with
two changes, both logic-preserving:

* Yosys's ``opt_dff`` after ``proc -nomux -norom`` (Amaranth's own conversion script):
  flip-flops whose next state is their own value under a condition become flip-flops with
  an enable, which schedule no assignment on the cycles they hold;
* :func:`merge_clocked` gathers each module's ``always @(posedge clk)`` blocks into one
  block per clock (nonblocking assignments only, so their order does not matter): one
  thread wake-up per module and edge instead of one per flip-flop.

The design, its ports and its named signals are unchanged (``opt_clean`` removes only
unnamed, unused wires), so the testbenches and waveforms see the same names.  Verilator
builds keep Amaranth's Verilog.  ``docs/architecture.md`` ("Simulation speed") has the
measurements.
"""

from __future__ import annotations

import re

__all__ = ["convert", "merge_clocked"]

YOSYS_SCRIPT = ("proc -nomux -norom", "memory_collect", "opt_dff", "opt_clean")
_STRIP = "-remove generator -remove top -remove src -remove amaranth.hierarchy -remove amaranth.decoding"


def convert(design, name: str) -> str:
    """``design`` (an Amaranth component) as Verilog for Icarus, top module ``name``."""
    from amaranth.back import rtlil
    # Amaranth's own Yosys (the builtin-yosys extra), found as amaranth.back.verilog finds it.
    from amaranth._toolchain.yosys import find_yosys
    text = rtlil.convert(design, name=name, emit_src=False)
    script = [f"read_rtlil <<rtlil\n{text}\nrtlil", *YOSYS_SCRIPT,
              f"attrmap {_STRIP}", f"attrmap -modattr {_STRIP}", "write_verilog -norename"]
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    return merge_clocked(yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True))


_CLOCKED = re.compile(r"^  always @\(posedge (\S+)\)( begin)?$")


def merge_clocked(verilog: str) -> str:
    """Each module's ``always @(posedge CLK)`` blocks as one block per clock, placed at
    the end of the module (after every declaration).

    Expects Yosys's ``write_verilog`` layout: a block's head at two spaces' indentation,
    its body deeper (a single statement, or ``begin`` ... a line ``  end``).  A block
    with a blocking assignment (``=``) in its body is left where it is, as is anything
    this does not recognise."""
    lines = verilog.split("\n")
    out, merged = [], {}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _CLOCKED.match(line)
        if m:
            j, body = i + 1, []
            if m.group(2):                                  # begin ... "  end"
                while j < len(lines) and lines[j] != "  end":
                    body.append(lines[j])
                    j += 1
                ok = j < len(lines)
                j += 1
            else:                                           # one statement, indented deeper
                while j < len(lines) and lines[j].startswith("    "):
                    body.append(lines[j])
                    j += 1
                ok = bool(body)
            if ok and not any(_blocking(b) for b in body):
                merged.setdefault(m.group(1), []).extend(body)
                i = j
                continue
        if line.startswith("endmodule"):
            for clk, body in merged.items():
                out += [f"  always @(posedge {clk}) begin", *body, "  end"]
            merged = {}
        out.append(line)
        i += 1
    return "\n".join(out)


def _blocking(stmt: str) -> bool:
    """Does this line hold a blocking assignment?  ``write_verilog`` spaces it ``lhs = rhs``
    (``<=``, ``==``, ``>=`` and ``!=`` never have a space before their ``=``)."""
    return " = " in stmt
