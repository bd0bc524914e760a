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
* :func:`fold_next_state` moves the ``always @*`` block that computes a flip-flop's next
  state (Amaranth writes one per register: a default, then the ``If``s of its
  ``m.d.sync`` statements) into the flip-flop's clocked block, as nonblocking assignments
  to the flip-flop itself; it then runs once per edge instead of at every change of its
  inputs, and a flip-flop that holds schedules nothing;
* :func:`merge_clocked` gathers each module's ``always @(posedge clk)`` blocks into one
  block per clock (nonblocking assignments only, so their order does not matter): one
  thread wake-up per module and edge instead of one per flip-flop.

The design, its ports and its named signals are unchanged (``opt_clean`` removes only
unnamed, unused wires), so the testbenches and waveforms see the same names.  Verilator
builds keep Amaranth's Verilog.  The README's benchmark section has the measurements.
"""

from __future__ import annotations

import re

__all__ = ["convert", "fold_next_state", "merge_clocked"]

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
    return merge_clocked(fold_next_state(yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)))


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
    (``<=``, ``==``, ``>=`` and ``!=`` never have a space before their ``=``); attributes
    (``(* full_case = 32'd1 *)``) are not assignments."""
    return " = " in re.sub(r"\(\*.*?\*\)", "", stmt)


_FLOP = re.compile(r"^    (\S+) <= (\\\S+ |[A-Za-z_][\w$]*) ?;$")          # Q <= D ;
_ASSIGN = re.compile(r"^(\s+)(\\\S+ |[A-Za-z_][\w$]*)(\s*\[[^\]]*\])?\s*= (.*)$")   # T[sel] = rhs
_DUMMY = re.compile(r"^    if \(\\\$auto\$verilog_backend\S* \) begin end$")


def _uses(text: str, name: str) -> int:
    """Occurrences of identifier ``name`` in ``text`` (an escaped one ends at its space)."""
    if name.startswith("\\"):
        return text.count(name)
    return len(re.findall(r"(?<![\w$\\])" + re.escape(name) + r"(?![\w$])", text))


def fold_next_state(verilog: str) -> str:
    """Per module, each flip-flop ``always @(posedge clk) Q <= T;`` whose ``T`` is computed
    by an ``always @*`` block that assigns ``T`` alone, and used nowhere else, becomes
    that block's statements in the clocked block, each ``T = rhs`` as ``Q <= rhs`` (a
    leading ``T = Q;`` default dropped: a flip-flop holds its value by itself).  The
    last assignment wins either way, so the flip-flop takes the same value on every edge.
    Anything else is left as it is."""
    modules = verilog.split("\nendmodule")
    for n, mod in enumerate(modules):
        lines = mod.split("\n")
        flops = {}                                  # T -> (line of the clocked head, Q)
        for i in range(len(lines) - 1):
            if lines[i] == "  always @(posedge clk)" and (m := _FLOP.match(lines[i + 1])) \
                    and (i + 2 == len(lines) or not lines[i + 2].startswith("    ")):
                flops[m.group(2)] = (i, m.group(1))
        drop, folded = set(), {}
        i = 0
        while i < len(lines):
            if lines[i] != "  always @* begin":
                i += 1
                continue
            start = j = i
            while j < len(lines) and lines[j] != "  end":
                j += 1
            body, i = lines[start + 1:j], j + 1
            writes = [m for b in body if (m := _ASSIGN.match(b))]
            targets = {m.group(2) for m in writes}
            if len(targets) != 1 or (t := targets.pop()) not in flops:
                continue
            head, q = flops[t]
            if _uses("\n".join(body), t) != len(writes) or _uses(mod, t) != len(writes) + 2:
                continue                             # read somewhere: not a next-state block alone
            stmts = []
            for b in body:
                if _DUMMY.match(b):
                    continue
                if m := _ASSIGN.match(b):
                    indent, _, sel, rhs = m.groups()
                    if not stmts and indent == "    " and sel is None and rhs == f"{q};":
                        continue                     # the default: hold
                    b = f"{indent}{q}{(sel or '').strip()} <= {rhs}"
                stmts.append(b)
            drop.update(range(start, j + 1))
            drop.add(head + 1)
            folded[head] = ["  always @(posedge clk) begin", *stmts, "  end"]
        if folded:
            out = []
            for k, line in enumerate(lines):
                if k in folded:
                    out += folded[k]
                elif k not in drop:
                    out.append(line)
            modules[n] = "\n".join(out)
    return "\nendmodule".join(modules)
