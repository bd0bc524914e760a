"""A static checker for programs, whoever wrote them.

``Program.validate`` checks each instruction on its own; the golden model and the RTL run
whatever they are given.  A program legal word by word can still lose data on the streams
(a value replaced before any slice read it), read a stream where nothing was driven, or
mismatch its C2C transfers.  :func:`check_program` (one tile) and :func:`check_system`
(tiles linked over C2C) find those statically, from the program text, the issue cycle of
every data instruction (``archmodel.expand``) and every opcode's stream reads and drives
(``lpu_arch.effects``, the diagonal rule of ``lpu_arch.timing``), and nothing the compiler
knows: a hand-written program is checked by the same rules as a compiled one.  Both return
a list of :class:`Problem` (empty: clean); :func:`require_clean` raises :class:`CheckError`.

The stream model (``hdl/units/fabric.py``, ``hdl/top/tile.py``)
-----------------------------------------------------
Each position has, per direction and stream, a register loaded every cycle with the
slice's drive if it drives that stream, else with the value passing; the edges feed zeros.
A drive at ``p`` on ``t`` is seen at ``p+d`` (east) / ``p-d`` (west) on ``t+d``: it stays on
one *diagonal* (``timing.diagonal``), seen at every position after its driver up to and
including the next driver downstream on that diagonal (whose own position still sees the
passing value on that cycle), or to the edge.

live
    A value is live at ``q`` on cycle ``t`` if some slice strictly upstream of ``q`` drives
    the stream on the diagonal of ``(q, t)``; the value is the *nearest* such driver's, else
    the zeros fed at the edge.  A replaced value is never seen downstream of its
    replacement, so a read sees the nearest upstream drive or nothing.
replaced
    Driver A's value (``pa``, ``ta``) is replaced when the next driver B downstream on the
    same diagonal drives at ``pb`` on ``tb = ta + |pb - pa|``; it is *replaced before read*
    when no read (LW rows included) samples it at a position after ``pa`` up to ``pb``.
    Replacing a value some slice sampled is legal (the compiler reuses streams after a
    value's last reader), and so is an unread value that runs off the edge.

A drive seen nowhere (east at the last position, west at position 0) takes no part.  Times
are the program's own cycles (SAC time on linked tiles: a deskew stall freezes the streams).

Rules
-----
``replaced-before-read``, ``undriven-read``, ``double-drive`` (two drives of one stream,
direction, position and cycle), ``program`` (``Program.validate``'s checks, every REPEAT
repetition included), ``mxm-state`` (what the golden model faults on in an MXM, from issue
order alone: LW while the previous LW still loads, ``MM ACC`` into a row no earlier MM
wrote, ``MM XBUF`` from a slot no earlier LX wrote), ``link-overrun`` (a SEND less than
``flits_per_vector`` cycles after the previous one on its link), and for systems
``link-unmatched`` (the k-th vector sent on a link is received by the k-th RECV on its peer
link; a SEND without a RECV or a RECV without a SEND), ``link-early`` (a RECV fewer than
``c2c.min_distance`` cycles after its SEND: an underflow) and ``link-overflow`` (more than
``rx_depth`` vectors between their SEND and their RECV on one link, counted from the SEND,
as ``firmware_gen/compiler/system.py`` states the buffer rule).

``undefined-read``: SRAM powers up random, so a ``READ`` (the one opcode that reads a MEM
row) of a row nothing defined is a problem naming the slice, the row, the READ and its
issue cycle.  A row is defined when ``Program.defined_rows`` says so before the run (its
slice has an image: every row of it, zero rows as zero, which a loader must write; or the
row is declared in ``Program.defined``: rows the compiler loads, rows an earlier run left,
rows the host writes before the run, blocks zero-filled on purpose), or when a ``WRITE`` of
the same slice wrote it on an earlier cycle (within a cycle a READ reads first).  READs and
WRITEs that name a base register other than 0 are not judged: their row is the host's
offset plus the address (``docs/isa.md``, *Base registers*).
"""

from __future__ import annotations

import bisect
import copy
import itertools
from collections import defaultdict
from dataclasses import dataclass

from lpu_arch.config import ConfigError
from lpu_arch.effects import effects, effects_key
from lpu_arch.isa import DIR_NAMES, EAST, IsaError, MMFlag, Op
from lpu_arch.timing import diagonal, lw_cycles
from lpu_arch.errors import LpuError

from firmware_gen.golden.archmodel import ModelError, expand, send_to_recv
from firmware_gen.program import Program, ProgramError

REPLACED = "replaced-before-read"
UNDRIVEN = "undriven-read"
DOUBLE = "double-drive"
PROGRAM = "program"
MXM_STATE = "mxm-state"
LINK_OVERRUN = "link-overrun"
LINK_UNMATCHED = "link-unmatched"
LINK_EARLY = "link-early"
LINK_OVERFLOW = "link-overflow"
UNDEFINED = "undefined-read"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a program.

    ``slices``: the slices involved, the offending one first (for ``replaced-before-read``
    the driver whose value is lost, then the one that replaces it).  ``stream``: e.g.
    ``"E0"`` (the first one, when an instruction's several streams share the problem; the
    message lists all).  ``position``/``cycle``: where and when it happens (the replacing
    driver's position and drive cycle; the reader's position and sample cycle; the
    issuing slice's position and issue cycle).  ``tile``: in a system, the tile index."""
    rule: str
    message: str
    slices: tuple = ()
    stream: str | None = None
    position: int | None = None
    cycle: int | None = None
    tile: int | None = None

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


class CheckError(LpuError, ValueError):
    """A program failed :func:`check_program` / :func:`check_system`; ``problems`` lists why."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"the program fails the static check ({len(problems)} problem(s)): {problems[0]}\n"
                         + "\n".join(f"  {p}" for p in problems[:20]) + more)


def _cycles(cs) -> str:
    lo, hi = min(cs), max(cs)
    return f"cycle {lo}" if lo == hi else f"cycles {lo}..{hi}"


def _streams(ss) -> str:
    out = list(dict.fromkeys(ss))
    return ("stream " if len(out) == 1 else "streams ") + ", ".join(out)


class _Issued:
    """Every issued data instruction of one tile: (queue, issue cycle, Instr)."""

    def __init__(self, program: Program, tile):
        cfg = self.cfg = program.config
        self.tile = tile
        self.pre = "" if tile is None else f"tile {tile} "
        self.insts: list[tuple[str, int, object]] = []
        self.by_slice: dict[str, list[int]] = {}
        for name in cfg.queue_names:
            q = program.queues.get(name, [])
            try:
                tl, _ = expand(q)
            except ModelError:          # REPEAT before any data instruction: _validate names it
                tl = []
            self.by_slice[name] = list(range(len(self.insts), len(self.insts) + len(tl)))
            self.insts += [(name, t, ins) for t, ins in tl]

    def describe(self, i: int) -> str:
        name, t, ins = self.insts[i]
        return f"{self.pre}{name} '{ins}' (issued on cycle {t})"

    def problem(self, rule: str, message: str, i: int, *also: str) -> Problem:
        """A :class:`Problem` of instruction ``i`` (its queue, then the slices ``also``), at
        its position and issue cycle."""
        name, t, _ = self.insts[i]
        return Problem(rule, message, (name, *also), None, self.cfg.position(name), t, self.tile)


def _validate(program: Program, iss: _Issued, problems) -> None:
    """``Program.validate`` queue by queue, so that every bad queue is named."""
    for name, q in program.queues.items():
        one = copy.copy(program)
        one.queues = {name: q}
        try:
            one.validate()
        except (ProgramError, IsaError, ConfigError, ModelError) as e:
            pos = program.config.position(name) if name in program.config.queue_names else None
            problems.append(Problem(PROGRAM, f"{iss.pre}{e}", (name,), position=pos, tile=iss.tile))


def _streams_check(iss: _Issued, problems) -> None:
    """Rules replaced-before-read, undriven-read and double-drive: walk every diagonal."""
    cfg = iss.cfg
    P, lanes = cfg.positions, cfg.lanes
    names = cfg.slice_names
    drives = defaultdict(list)      # (d, s, diagonal) -> [(u, p, t, inst)]; u = flow coordinate
    reads = defaultdict(list)       # (d, s, diagonal) -> [(u, p, t, inst)]
    cache = {}
    for i, (name, t0, ins) in enumerate(iss.insts):
        key = effects_key(ins, name)
        eff = cache.get(key)
        if eff is None:
            eff = cache[key] = effects(ins, name, lanes, cfg.acc_planes, cfg.vxm_latency)
        p = cfg.position(name)
        seen = [a for a in eff.drives if p != (P - 1 if a.dir == EAST else 0)]    # others are seen nowhere
        for table, accesses in ((drives, seen), (reads, eff.reads)):
            for a in accesses:
                t = t0 + a.offset
                table[(a.dir, a.stream, diagonal(a.dir, p, t))].append((p if a.dir == EAST else -p, p, t, i))

    # Aggregate per (rule, instruction instances) so that an LW's rows or an int32's planes give one problem.
    agg: dict[tuple, dict] = {}

    def note(key, slices, stream, p, t, src=None):
        g = agg.setdefault(key, {"slices": slices, "at": [], "src": []})
        g["at"].append((t, p, stream))
        if src is not None:
            g["src"].append(src)

    for key in set(drives) | set(reads):
        sn = f"{DIR_NAMES[key[0]]}{key[1]}"            # the stream's name, e.g. E0
        # groups of drivers at one position (more than one there is a double drive)
        drv = sorted(drives.get(key, ()))
        by_u = [(u, [x[1:] for x in g]) for u, g in itertools.groupby(drv, key=lambda x: x[0])]
        us, groups = [u for u, _ in by_u], [g for _, g in by_u]
        read_by = [False] * len(groups)
        for u, p, t, i in reads.get(key, ()):
            g = bisect.bisect_left(us, u) - 1          # nearest driver strictly upstream
            if g < 0:
                note((UNDRIVEN, i), (names[p],), sn, p, t)
            else:
                read_by[g] = True
        for g, grp in enumerate(groups):
            p, t, first = grp[0]
            for _, _, other in grp[1:]:
                note((DOUBLE, first, other), (names[p],), sn, p, t)
            if g + 1 < len(groups) and not read_by[g]:
                q, tq, rep = groups[g + 1][0]
                note((REPLACED, first, rep), (names[p], names[q]), sn, q, tq, (t, p))

    for key, g in agg.items():
        at = sorted(g["at"])
        t, p, stream = at[0]
        ss, cs = [a[2] for a in at], [a[0] for a in at]
        rule = key[0]
        where = f"{names[p]} (position {p})"
        if rule == REPLACED:
            a, b = key[1], key[2]
            ta, pa = min(g["src"])
            msg = (f"the value {iss.describe(a)} drives on {_streams(ss)} at {names[pa]} (position {pa}) on "
                   f"{_cycles([x[0] for x in g['src']])} is replaced by {iss.describe(b)} at {where} on "
                   f"{_cycles(cs)} before any slice read it")
        elif rule == UNDRIVEN:
            rows = f" ({len(at)} rows)" if iss.insts[key[1]][2].op == Op.LW and len(at) > 1 else ""
            msg = (f"{iss.describe(key[1])} reads {_streams(ss)}{rows} at {where} on {_cycles(cs)} where no "
                   f"value is live: no slice upstream drives it there (the stream carries 0)")
        else:
            msg = (f"{iss.describe(key[1])} and {iss.describe(key[2])} both drive {_streams(ss)} at {where} "
                   f"on {_cycles(cs)}")
        problems.append(Problem(rule, msg, g["slices"], stream, p, t, iss.tile))


def _mxm_check(iss: _Issued, problems) -> None:
    """Rule mxm-state: the MXM faults of the golden model, from issue order alone."""
    cfg = iss.cfg
    for loader, name in cfg.LOADERS.items():
        if name not in iss.by_slice:
            continue
        acc_ok, slot_ok, prev_start, prev_end, last_lw = set(), set(), -1, -1, None
        # The MXM's MMs and its loader's LWs and LXs in issue order; in one cycle the MM
        # reads the x slot before the LX writes it.
        order = sorted(iss.by_slice[name] + iss.by_slice.get(loader, []),
                       key=lambda i: (iss.insts[i][1], iss.insts[i][2].op != Op.MM))
        for i in order:
            _, t, ins = iss.insts[i]
            msg = None
            if ins.op == Op.LW:
                first = t + ins.operand("delay")
                if t < prev_start:
                    msg = (f"{iss.describe(i)} issues while {iss.describe(last_lw)} still waits to start "
                           f"its load (on cycle {prev_start}); one LW may wait")
                elif first < prev_end:
                    msg = (f"{iss.describe(i)} starts a weight load on cycle {first} while {iss.describe(last_lw)} "
                           f"still loads (until cycle {prev_end - 1})")
                prev_start, prev_end, last_lw = first, first + lw_cycles(ins.lw_rows(cfg.lanes), ins.operand("n")), i
            elif ins.op == Op.LX:
                slot_ok.add(ins.operand("slot"))
            elif ins.op == Op.MM:
                slot, acc = ins.operand("slot"), ins.operand("acc")
                if ins.aux & MMFlag.XBUF and slot not in slot_ok:
                    msg = f"{iss.describe(i)} reads x slot {slot} before any LX wrote it"
                elif ins.aux & MMFlag.ACC and acc not in acc_ok:
                    msg = f"{iss.describe(i)} accumulates into row {acc} before any MM without ACC wrote it"
                acc_ok.add(acc)
            if msg:
                problems.append(iss.problem(MXM_STATE, msg, i))


def _undefined_check(program: Program, iss: _Issued, problems) -> None:
    """Rule undefined-read: a READ of a row nothing defined before it issues."""
    cfg = iss.cfg
    for name in cfg.mem_names:
        before = program.defined_rows(name)
        if before.all():
            continue
        written: dict[int, int] = {}            # row -> first cycle a WRITE (base register 0) lands
        reads = []
        for i in iss.by_slice.get(name, ()):
            _, t, ins = iss.insts[i]
            if ins.base:                        # relocated by the host's base word: not known here
                continue
            if ins.op == Op.WRITE:
                written[ins.addr] = min(written.get(ins.addr, t), t)
            elif ins.op == Op.READ and ins.addr < cfg.mem_depth and not before[ins.addr]:
                reads.append((t, ins.addr, i))
        for t, row, i in reads:
            w = written.get(row)
            if w is None or w >= t:
                late = "" if w is None else f"; the first WRITE of it lands on cycle {w}, not before the READ"
                problems.append(iss.problem(UNDEFINED, f"{iss.describe(i)} reads {name} row {row}, which nothing "
                                            f"defined: {name} has no memory image, the row is not declared "
                                            f"defined before the run and no earlier WRITE wrote it{late} (SRAM "
                                            f"powers up random)", i))


def _sends_recvs(iss: _Issued):
    """``sends[link]``, ``recvs[link]``: [(cycle, inst)] in issue order."""
    sends, recvs = defaultdict(list), defaultdict(list)
    for name in ("C2C_W", "C2C_E"):
        for i in iss.by_slice.get(name, ()):
            _, t, ins = iss.insts[i]
            if ins.op in (Op.SEND, Op.SENDM):
                for link in ins.links():
                    sends[link].append((t, i))
            elif ins.op == Op.RECV:
                recvs[ins.operand("link")].append((t, i))
    for v in (*sends.values(), *recvs.values()):
        v.sort()
    return sends, recvs


def _overrun_check(iss: _Issued, sends, problems) -> None:
    F = iss.cfg.flits_per_vector
    for link, lst in sorted(sends.items()):
        for (t0, a), (t1, b) in zip(lst, lst[1:]):
            if t1 < t0 + F:
                problems.append(iss.problem(
                    LINK_OVERRUN, f"{iss.describe(b)} sends on link {link} while {iss.describe(a)} is still being "
                    f"sent ({F} flits, one per cycle: the next SEND on cycle {t0 + F} at the earliest)",
                    b, iss.insts[a][0]))


def _order(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda q: (q.tile if q.tile is not None else -1, q.cycle if q.cycle is not None else -1,
                                           q.position if q.position is not None else -1, q.rule, q.message))


def _tile_problems(program: Program, tile):
    problems: list[Problem] = []
    iss = _Issued(program, tile)
    _validate(program, iss, problems)
    _streams_check(iss, problems)
    _mxm_check(iss, problems)
    _undefined_check(program, iss, problems)
    sends, recvs = _sends_recvs(iss)
    _overrun_check(iss, sends, problems)
    return problems, iss, sends, recvs


def check_program(program: Program, *, tile: int | None = None) -> list[Problem]:
    """Every problem of one tile's program (see the module docstring for the rules);
    ``[]`` when it is clean.  ``tile`` only labels the problems."""
    return _order(_tile_problems(program, tile)[0])


def check_system(programs: list[Program], peer, min_distance: int | None = None) -> list[Problem]:
    """Every problem of tiles linked over C2C: each tile as :func:`check_program`, plus the
    transfers.  ``peer(tile, link) -> (tile', link')`` says where a vector tile sends on
    ``link`` is received (``Topology(n).peer``; the same callable ``archmodel.run_system``
    takes).  ``min_distance``: fewest cycles from a SEND to its RECV (default
    ``archmodel.send_to_recv`` of tile 0's configuration)."""
    tiles = [_tile_problems(prog, k) for k, prog in enumerate(programs)]
    problems = [p for pr, *_ in tiles for p in pr]
    per = [(iss, sends, recvs) for _, iss, sends, recvs in tiles]
    if programs and min_distance is None:
        min_distance = send_to_recv(programs[0].config)
    matched = set()          # (receiving tile, link) pairs some sender feeds
    for k, (iss, sends, _) in enumerate(per):
        for link, sl in sorted(sends.items()):
            try:
                dst, dlink = peer(k, link)
                per[dst]
            except (ConfigError, IndexError, KeyError, ValueError) as e:
                _, i = sl[0]
                problems.append(iss.problem(LINK_UNMATCHED, f"{iss.describe(i)} sends on link {link}, which "
                                            f"leads to no tile of the system ({e})", i))
                continue
            if (dst, dlink) in matched:
                continue
            matched.add((dst, dlink))
            riss, _, rrecvs = per[dst]
            _pair(k, link, iss, sl, dst, dlink, riss, rrecvs.get(dlink, []), min_distance, problems)
    for k, (iss, _, recvs) in enumerate(per):
        for link, rl in sorted(recvs.items()):
            if (k, link) not in matched:
                _pair(None, None, None, [], k, link, iss, rl, min_distance, problems)
    return _order(problems)


def _pair(src, link, siss, sl, dst, dlink, riss, rl, min_distance, problems) -> None:
    """The k-th SEND on (src, link) is received by the k-th RECV on (dst, dlink)."""
    rname = riss.cfg.link_slice(dlink) if dlink < riss.cfg.links else "C2C_W"
    whence = f"link {link} of tile {src}"
    for n, ((ts, a), (tr, b)) in enumerate(zip(sl, rl)):
        if tr < ts + min_distance:
            problems.append(riss.problem(
                LINK_EARLY, f"{riss.describe(b)} receives vector {n} of {whence} on cycle {tr}, but "
                f"{siss.describe(a)} sent it on cycle {ts}: it cannot arrive before cycle {ts + min_distance} "
                f"(SEND-to-RECV distance {min_distance}); the RECV would underflow", b, siss.insts[a][0]))
    for ts, a in sl[len(rl):]:
        problems.append(siss.problem(
            LINK_UNMATCHED, f"{siss.describe(a)} sends a vector on link {link} that no RECV on tile {dst} link "
            f"{dlink} takes ({len(sl)} sent, {len(rl)} received there)", a))
    for tr, b in rl[len(sl):]:
        why = (f"{len(sl)} sent on {whence}, {len(rl)} received" if src is not None
               else "no tile sends on the link that leads here")
        problems.append(riss.problem(
            LINK_UNMATCHED, f"{riss.describe(b)} receives on link {dlink} a vector nothing sends ({why}): "
            "the RECV would underflow", b))
    # Receive buffer: a vector counts from its SEND to its RECV (inclusive: on one cycle,
    # the SENDs count before the RECVs).
    depth = riss.cfg.rx_depth
    spans = [(ts, tr) for (ts, _), (tr, _) in zip(sl, rl)]
    events = sorted([(s, 0, 1) for s, _ in spans] + [(r, 1, -1) for _, r in spans])
    for (c, _, _), level in zip(events, itertools.accumulate(step for *_, step in events)):
        if level > depth:
            problems.append(Problem(
                LINK_OVERFLOW, f"tile {dst} link {dlink} ({rname}) may hold {level} vectors on cycle {c}, more "
                f"than its receive buffer's {depth} (vectors sent on {whence} and not yet received)",
                (rname,), None, riss.cfg.position(rname), c, dst))
            break


def require_clean(program: Program) -> Program:
    """``program`` if :func:`check_program` finds nothing, else :class:`CheckError`."""
    problems = check_program(program)
    if problems:
        raise CheckError(problems)
    return program
