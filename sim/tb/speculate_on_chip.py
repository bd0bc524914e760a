"""cocotb testbench of speculative decoding with the token loop on the tile as the draft
(``sim/flows/speculate_on_chip.py``): the float target and the compiler run here, between the
rounds; each round the tile runs the round's program (``round_job``: the first loads everything,
a later one writes the program's words that differ and the fed tokens), and the host reads the
``k`` ids."""

from __future__ import annotations

import cocotb

from lpu_arch.config import TileConfig

from firmware_gen.compiler.token_loop import ID_MEM, TokenLoop
from firmware_gen.golden.archmodel import vector_index
from firmware_gen.golden.token_loop import quantise, synthetic_float
from sim.flows.speculate_on_chip import round_job, rounds_gen
from sim.tb.driver import TileDriver, read_spec, run_job, write_results


@cocotb.test()
async def speculate_on_chip(dut):
    spec = read_spec()
    cfg, a = TileConfig.from_dict(spec["config"]), spec["speculate"]
    fm = synthetic_float(**a["model"])
    model = quantise(fm)
    drv = TileDriver(dut, cfg)
    await drv.reset()
    gen, rounds = rounds_gen(fm, a["prompt"], a["n"], a["k"]), []
    request = next(gen)
    while True:
        start, feed = request
        loop = TokenLoop(cfg, model, a["k"], prompt_len=len(feed), start=start)
        res = await run_job(dut, drv, cfg, round_job(loop, feed, first=not rounds))
        ids = [vector_index(v) for v in res["read_back"][ID_MEM]]
        rounds.append({**res, "start": start, "feed": list(feed), "ids": ids})
        try:
            request = gen.send(ids)
        except StopIteration as done:
            run = done.value
            break
    write_results([{"tokens": run["tokens"], "rounds": rounds}])
