"""The MoE layer on one tile and on trays, on the golden model: one program for every
routing, every write and the cycle count as the compiler predicts, every routed and
shared expert's output bit-exact against ``moe.moe_int``, only the selected experts'
weights read (the busy counters), rounds beyond capacity."""

import dataclasses

import numpy as np
import pytest

from firmware_gen.golden import archmodel
from firmware_gen.compiler import CompileError
from firmware_gen.check import check_program, check_system
from firmware_gen.golden.moe import example_moe, moe_int, route
from firmware_gen.compiler.moe_tray import ROUTINGS, MoeError, compile_moe, forced_routing, rounds
from firmware_gen.scoreboard import Observed, compare, expert_outputs, moe_reference
from lpu_arch import TileConfig
from lpu_arch.topology import Topology

TINY = TileConfig.tiny_tray()


def run_round(mt, progs, asg):
    bases = mt.bases(asg)
    if mt.tiles > 1:
        return archmodel.run_system(progs, Topology(mt.tiles).peer, bases=bases)
    return [archmodel.run(progs[0], bases=bases[0])]


def check_routing(mt, ex, indices):
    """Run every round of ``indices`` on the golden model; check the predictions and the
    outputs; return the per-tile cycle counts of each round."""
    progs = mt.programs()
    stages = moe_int(ex.spec, ex.x_int8, indices)
    seen, cycles = set(), []
    for asg in mt.rounds(indices):
        res = run_round(mt, progs, asg)
        routed, shared = mt.outputs(asg, [r.memory for r in res])
        pairs = {(b, e) for (_, b, _), e in asg.items()}
        problems = mt.round_problems(asg, res) + compare(Observed("golden model", outputs=expert_outputs(routed, shared)),
                                                         moe_reference(stages, pairs))
        assert not problems, "\n".join(problems)
        seen |= pairs
        cycles.append([r.cycles for r in res])
    assert seen == {(b, int(e)) for b in range(len(indices)) for e in indices[b]}
    return cycles


@pytest.mark.parametrize("mapping, tiles, E, k, S, T", [
    ("ep", 1, 3, 2, 1, 2), ("ep", 2, 4, 2, 0, 1), ("ep", 4, 8, 2, 1, 2), ("ep", 8, 16, 4, 1, 1),
    ("tp", 2, 3, 2, 1, 1), ("tp", 4, 4, 2, 0, 2), ("tp", 8, 6, 3, 1, 1),
    ("tps", 2, 3, 2, 1, 1), ("tps", 4, 4, 2, 1, 1), ("tps", 4, 4, 2, 0, 2), ("tps", 8, 6, 3, 1, 1),
    ("tps", 2, 3, 2, 1, 3), ("tps", 4, 4, 2, 1, 2), ("tps", 8, 4, 2, 1, 2)])
def test_every_routing_runs_in_the_scheduled_cycles(mapping, tiles, E, k, S, T):
    ex = example_moe(E=E, top_k=k, shared=S, H=8, I=8, batch=T, seed=tiles)
    mt = compile_moe(ex.spec, ex.x_int8, TINY, tiles=tiles, mapping=mapping)
    progs = mt.programs()
    assert (check_system(progs, Topology(tiles).peer) if tiles > 1 else check_program(progs[0])) == []
    man = mt.manifest()
    router = route(ex.spec.router, ex.x)[0]
    per_tile = E // tiles if mapping == "ep" else E
    cases = [router] + [forced_routing(n, E, k, T, tiles, mt.capacity, seed=3) for n in ROUTINGS
                        if n != "over" and (mapping == "ep" or n == "random")]
    for indices in cases:
        assert len(mt.rounds(indices)) == 1 or indices is router and mapping == "ep"
        assert per_tile == len(mt.layouts[0].experts)
        got = check_routing(mt, ex, indices)
        assert all(c == man.cycles for c in got)


@pytest.mark.parametrize("mapping, tiles, E, I", [("ep", 4, 8, 16), ("tp", 2, 3, 32)])
def test_fp8_moe_layer(mapping, tiles, E, I):
    """An FP8 MoE layer (E4M3 experts on FP8 tiles): every routing's outputs are the FP8
    golden model's codes, at the predicted cycles."""
    cfg = dataclasses.replace(TileConfig.default(), mxm_dtype="fp8", iq_depth=TileConfig.TRAY_IQ_DEPTH, mem_depth=256)
    ex = example_moe(E=E, top_k=2, shared=1, H=16, I=I, batch=2, seed=5, dtype="fp8")
    assert ex.spec.dtype == "fp8" and ex.x_int8.dtype == np.uint8
    mt = compile_moe(ex.spec, ex.x_int8, cfg, tiles=tiles, mapping=mapping)
    for indices in (route(ex.spec.router, ex.x)[0], forced_routing("random", E, 2, 2, tiles, mt.capacity, seed=1)):
        assert all(c == mt.manifest().cycles for c in check_routing(mt, ex, indices))


def test_unplaceable_mm_is_an_error_not_a_hang():
    """A tensor-parallel layer whose W2 pairs an h block with itself on one MXM (I = one
    block per tile) cannot be placed by this schedule: the compiler says so."""
    cfg = dataclasses.replace(TileConfig.default(), iq_depth=TileConfig.TRAY_IQ_DEPTH, mem_depth=256)
    ex = example_moe(E=4, top_k=2, shared=1, H=16, I=16, batch=2, seed=5)
    with pytest.raises(CompileError, match="MM 0 finds no cycle up to .* this schedule cannot place it"):
        compile_moe(ex.spec, ex.x_int8, cfg, tiles=2, mapping="tp")


def test_beyond_capacity_runs_in_rounds_of_the_same_cycles():
    ex = example_moe(E=8, top_k=2, shared=1, H=8, I=8, batch=1, seed=5)
    mt = compile_moe(ex.spec, ex.x_int8, TINY, tiles=4, capacity=1)
    over = forced_routing("over", 8, 2, 1, 4, 1)
    assert len({e // 2 for e in over[0]}) == 1           # both on one tile
    rs = rounds(over, 8, 4, 1)
    assert len(rs) == 2 and all(len(r) == 1 for r in rs)
    assert check_routing(mt, ex, over) == [mt.manifest().cycles] * 2


def test_only_the_selected_experts_weights_are_read():
    """The MEM busy counters of a round: the unused slots' weight READs skip, so the
    weights read per token are exactly the selected experts' (and the shared expert's)."""
    ex = example_moe(E=16, top_k=4, shared=1, H=8, I=8, batch=1, seed=7)
    mt = compile_moe(ex.spec, ex.x_int8, TINY, tiles=8)
    man = mt.manifest()
    none = mt.predicted_busy({})
    for name in ("spread", "packed"):
        asg = rounds(forced_routing(name, 16, 4, 1, 8, mt.capacity), 16, 8, mt.capacity)[0]
        res = run_round(mt, mt.programs(), asg)
        extra = sum(r.busy[m] - none[t].get(m, 0) for t, r in enumerate(res) for m in TINY.mem_names)
        assert extra == 4 * man.weight_vectors["routed"]


def test_tp_reads_each_tiles_share_of_the_selected_experts_only():
    """tp: every tile reads 1/N of each selected expert; the MEM issues added by turning the
    slots on are the selected experts' weight vectors, over the whole tray."""
    ex = example_moe(E=6, top_k=3, shared=1, H=8, I=8, batch=1, seed=2)
    mt = compile_moe(ex.spec, ex.x_int8, TINY, tiles=8, mapping="tp")
    man = mt.manifest()
    asg = mt.rounds(forced_routing("random", 6, 3, 1, 8, 3, seed=1))[0]
    res = run_round(mt, mt.programs(), asg)
    none = mt.predicted_busy({})
    extra = sum(r.busy[m] - none[t].get(m, 0) for t, r in enumerate(res) for m in TINY.mem_names)
    assert extra == 3 * man.weight_vectors["routed"]
    with pytest.raises(MoeError, match="capacity is top_k"):
        compile_moe(ex.spec, ex.x_int8, TINY, tiles=8, mapping="tp", capacity=1)


def test_the_limits_are_named():
    ex = example_moe(E=16, top_k=4, shared=1, H=8, I=8, batch=1, seed=1)
    with pytest.raises(MoeError, match="activation tables"):
        compile_moe(ex.spec, ex.x_int8, TINY, tiles=1)
    with pytest.raises(MoeError, match="tp mapping .* needs 2, 4 or 8 tiles"):
        compile_moe(ex.spec, ex.x_int8, TINY, tiles=1, mapping="tp")
    with pytest.raises(MoeError, match="do not divide evenly"):
        compile_moe(example_moe(E=6, top_k=2, H=8, I=8, batch=1).spec, np.zeros((1, 8)), TINY, tiles=4)
    with pytest.raises(MoeError, match="capacity must be in 1..2"):
        compile_moe(ex.spec, ex.x_int8, TINY, tiles=8, capacity=3)
    many = example_moe(E=16, top_k=4, shared=1, H=8, I=8, batch=8, seed=1)
    with pytest.raises(MoeError, match="base registers"):
        compile_moe(many.spec, many.x_int8, TINY, tiles=8)
    with pytest.raises(CompileError, match="SRAM|mem_depth"):
        compile_moe(ex.spec, ex.x_int8, dataclasses.replace(TINY, mem_depth=16), tiles=8)
    # the expert slots beside the shared expert's tray share: each fits, together they do not
    both = example_moe(E=4, top_k=2, shared=1, H=16, I=16, batch=1, gating="softmax")
    with pytest.raises(CompileError, match="mem_depth = 64 rows"):
        compile_moe(both.spec, both.x_int8, TINY, tiles=4, capacity=1)


def test_tps_is_nearer_the_floor_than_tp_and_runs_every_routing_alike():
    """4 tiny tiles, 3 experts of H=8, I=16 (one intermediate block per tile, two output
    blocks: two tiles hold each expert's): tps takes fewer cycles than tp, within 1.10x of
    the floor, and every routing runs in its scheduled cycles with every output exact."""
    ex = example_moe(E=3, top_k=2, shared=1, H=8, I=16, batch=1, seed=4)
    tp = compile_moe(ex.spec, ex.x_int8, TINY, tiles=4, mapping="tp").manifest()
    mt = compile_moe(ex.spec, ex.x_int8, TINY, tiles=4, mapping="tps")
    man = mt.manifest()
    assert man.cycles_max < tp.cycles_max
    assert man.floor <= man.cycles_max <= 1.10 * max(man.floor, man.needed_bound)
    assert check_system(mt.programs(), Topology(4).peer) == []
    for indices in [route(ex.spec.router, ex.x)[0], *(forced_routing(n, 3, 2, 1, 4, mt.capacity, seed=3)
                                                      for n in ("spread", "packed", "random"))]:
        assert check_routing(mt, ex, indices) == [man.cycles]


def test_the_compiler_chooses_the_mapping():
    ex = example_moe(E=3, top_k=2, shared=1, H=8, I=16, batch=1, seed=4)
    assert compile_moe(ex.spec, ex.x_int8, TINY, tiles=4).mapping == "tps"
    small = example_moe(E=3, top_k=2, shared=1, H=8, I=8, batch=1)
    assert compile_moe(small.spec, small.x_int8, TINY, tiles=1).mapping == "ep"   # one tile
    many = example_moe(E=8, top_k=2, shared=1, H=8, I=8, batch=1)                 # 9 tables > vxm_tables 8
    assert compile_moe(many.spec, many.x_int8, TINY, tiles=4).mapping == "ep"
    both = example_moe(E=4, top_k=2, shared=1, H=8, I=8, batch=1)
    assert compile_moe(both.spec, both.x_int8, TINY, tiles=4, capacity=1).mapping == "ep"   # a capacity: ep


def test_every_moe_layer_resident_on_a_tray():
    """resident_tray.compile_resident_tray with MoE layers: each layer's queues at its entry
    on every tile; each layer passes the static checker over the memories the layers before
    it left, and its golden run under a routing of its own keeps the compiler's promise
    (writes, cycles, busy counters, every expert's output moe_int's), the tray's memories
    carried from layer to layer.  Identical activation tables are shared: experts quantised
    with one table per layer take one table per layer on every tile."""
    from firmware_gen.compiler.resident_tray import compile_resident_tray
    from firmware_gen.host.decoder import calibrate, synthetic
    from firmware_gen.program import Program
    model = dict(vocab=64, H=16, I=16, layers=3, heads=2, seed=3, experts=4, top_k=2, shared=1)
    cfg, tiles = TileConfig.tiny_tray().with_overrides(["mem_depth=256", "vxm_param_depth=32"]), 4
    m = calibrate(synthetic(**model), moe_tables="layer")
    rt = compile_resident_tray(m.specs, cfg, tiles)
    assert rt.tables == [model["layers"]] * tiles
    apart = compile_resident_tray(m.specs, cfg.with_overrides(["vxm_tables=16"]), tiles, share_tables=False)
    assert apart.tables == [model["layers"] * (model["experts"] // tiles + 1)] * tiles
    mem = [{k: v.copy() for k, v in t.items()} for t in rt.memory]
    rng = np.random.default_rng(5)
    for l, ly in enumerate(rt.layers):
        for t, p in enumerate(ly.programs):
            for n, words in Program(p.config, p.queues).images().items():
                assert rt.images[t][n][rt.entries[l]:rt.entries[l] + len(words)] == words, (l, t, n)
        x = rng.integers(-127, 128, (1, model["H"]))
        idx = forced_routing("random", model["experts"], model["top_k"], 1, tiles, ly.tray.capacity, seed=l)
        mt, progs = ly.for_input(x), ly.programs_for(x, mem)
        assert check_system(progs, Topology(tiles).peer) == []
        (asg,) = mt.rounds(idx)
        res = archmodel.run_system(progs, Topology(tiles).peer, bases=mt.bases(asg))
        assert mt.round_problems(asg, res) == []
        mem = [r.memory for r in res]
        routed, _ = mt.outputs(asg, mem)
        want = moe_int(ly.spec, x, idx)
        for j, e in enumerate(idx[0]):
            assert (routed[(0, int(e))] == want.routed[0, j]).all(), (l, e)


def test_tps_batch_of_4_is_within_1_10x_of_its_limit():
    """The bench's MoE layer (32 experts of H=64, I=128, top-4, one shared, on 8 default tiles
    with the tables, parameter entries and base registers a share of every expert needs) at 4
    tokens: the compiler's choice is tps, and it takes at most 1.10x the larger of the batch
    bound and the floor per token (the manifest's ``limit``), every routing in the scheduled
    cycles on the golden model with every output exact."""
    cfg = TileConfig.default().with_overrides(["vxm_tables=64", "vxm_param_depth=128", "base_regs=64"])
    ex = example_moe(E=32, top_k=4, shared=1, H=64, I=128, batch=4, seed=1)
    mt = compile_moe(ex.spec, ex.x_int8, cfg, tiles=8)
    man = mt.manifest()
    assert mt.mapping == "tps" and mt.flushed
    assert man.cycles_max / man.tokens <= 1.10 * man.limit
    assert check_system(mt.programs(), Topology(8).peer) == []
    for indices in [route(ex.spec.router, ex.x)[0], *(forced_routing(n, 32, 4, 4, 8, mt.capacity, seed=3)
                                                      for n in ("spread", "packed", "random"))]:
        assert check_routing(mt, ex, indices) == [man.cycles]
