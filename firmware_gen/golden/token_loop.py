"""The integer model of the token loop on chip (``docs/afd.md``, "The token loop on chip"):
what ``compiler/token_loop.py`` compiles and the tile computes, bit for bit.

A :class:`LoopModel` is a stack of residual MLP layers between an embedding and an LM head,
all int8 weights (``lanes``-multiple sizes):

* ``x = E[id]``, the embedding row of the token;
* per layer: ``h = relu(requantise(W1 x, m1, s1))`` (the VXM's ``TABLE`` step with a ReLU
  table), ``x = requantise(c x + W2 h, m2, s2)``: the residual is an MXM product with the
  diagonal block ``c I``, summed with ``W2 h`` in the accumulator;
* ``logits = Wh x``, exact int32; the next token is their argmax, the lowest id on a tie
  (the SXM's ``ARGMAX``).

It has no attention (the attention step, ``compiler/attention.py``, is not in the loop yet): a
token's successor depends on that token only.  :func:`next_token` is the pure-integer
reference, :func:`generate` the greedy loop, :func:`synthetic` draws a model whose requantisers
are set from the activations of every token of its vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from firmware_gen.golden.quantise import quantise_scale, requantise

RELU = np.maximum(np.arange(256).astype(np.uint8).astype(np.int8), 0)   # the ReLU table, indexed by a byte


@dataclass
class LoopLayer:
    W1: np.ndarray          # (I, H) int8
    W2: np.ndarray          # (H, I) int8
    c: int                  # the residual's weight: c x joins W2 h in the accumulator (1..127)
    rq1: tuple              # (multiplier, shift) of h
    rq2: tuple              # (multiplier, shift) of the new x


@dataclass
class LoopModel:
    embed: np.ndarray       # (V, H) int8
    layers: list            # LoopLayer
    head: np.ndarray        # (V, H) int8

    @property
    def H(self) -> int:
        return self.embed.shape[1]

    @property
    def I(self) -> int:
        return self.layers[0].W1.shape[0] if self.layers else 0

    @property
    def vocab(self) -> int:
        return self.embed.shape[0]

    def weight_bytes(self) -> int:
        return int(self.embed.size + self.head.size + sum(l.W1.size + l.W2.size for l in self.layers))


def layer_int(layer: LoopLayer, x) -> np.ndarray:
    """One residual MLP layer on int8 ``x``: the new int8 x."""
    x = np.asarray(x, np.int64)
    a1 = layer.W1.astype(np.int64) @ x
    h = RELU[requantise(a1, *layer.rq1).astype(np.int64) & 0xFF].astype(np.int64)
    a2 = layer.c * x + layer.W2.astype(np.int64) @ h
    return requantise(a2, *layer.rq2).astype(np.int64)


def logits_int(model: LoopModel, token: int) -> np.ndarray:
    """The int32 logits after token ``token``."""
    x = model.embed[int(token)].astype(np.int64)
    for layer in model.layers:
        x = layer_int(layer, x)
    return model.head.astype(np.int64) @ x


def next_token(model: LoopModel, token: int) -> int:
    """The pure-integer reference: the argmax of the logits, the lowest id on a tie."""
    return int(np.argmax(logits_int(model, token)))


def generate(model: LoopModel, prompt, tokens: int) -> list[int]:
    """``tokens`` greedy tokens after ``prompt`` (only its last token matters: no attention)."""
    out, t = [], int(list(prompt)[-1])
    for _ in range(tokens):
        t = next_token(model, t)
        out.append(t)
    return out


def _scale_for(values, target=96) -> tuple:
    """The requantiser that maps the largest magnitude of ``values`` to about ``target``."""
    peak = max(float(np.abs(values).max()), 1.0)
    return quantise_scale(target / peak)


def synthetic(vocab: int = 64, H: int = 32, I: int = 64, layers: int = 2, seed: int = 0, c: int = 64) -> LoopModel:
    """A random model whose requantisers are calibrated on every token of the vocabulary (so
    no activation saturates more than its largest value does).  Its LM head is the embedding
    of a random permutation's successors plus noise, so that greedy generation walks long
    cycles instead of settling on one token."""
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.integers(-127, 128, shape).astype(np.int8)
    embed = w(vocab, H)
    succ = rng.permutation(vocab)                          # token t's intended successor succ[t]
    head = np.empty_like(embed)
    head[succ] = np.clip(embed.astype(np.int64) // 2 + rng.integers(-32, 33, embed.shape), -127, 127)
    model = LoopModel(embed=embed, layers=[], head=head)
    xs = model.embed.astype(np.int64)                      # every token's x, layer by layer
    for _ in range(layers):
        W1, W2 = w(I, H), (w(H, I) // 16).astype(np.int8)     # a small update beside the residual
        rq1 = _scale_for(xs @ W1.T.astype(np.int64))
        layer = LoopLayer(W1, W2, c, rq1, (1, 0))
        h = RELU[requantise(xs @ W1.T.astype(np.int64), *rq1).astype(np.int64) & 0xFF].astype(np.int64)
        layer.rq2 = _scale_for(c * xs + h @ W2.T.astype(np.int64))
        model.layers.append(layer)
        xs = np.stack([layer_int(layer, x) for x in xs])
    return model
