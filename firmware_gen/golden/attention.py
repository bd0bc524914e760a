"""One decode step of causal attention, one head, in the tile's integer arithmetic: the golden
reference the attention program must reproduce bit for bit (``docs/numerics.md``, "Attention").

A head has dimension ``D`` (a multiple of the lanes; all-MiniLM-L6-v2: 32 = 2 blocks of 16).
The cache holds the int8 keys ``K`` and values ``V`` of positions ``0..L-1`` in blocks of
``BLOCK`` (16) positions; the program reserves whole blocks, so positions ``L..nb*BLOCK-1``
(``nb = ceil(L / BLOCK)``) are reserved rows, zero-filled, read and masked.  The new
position's query ``q`` is int8.  Every step below is an operation the tile has; the lane
maximum of step 3 is the SXM's ``MAX``, built where ``TileConfig.sxm_max`` is 1:

1. ``S = K q + mask`` (int32, exact).  MXM: per position block, ``LW`` of the block's K rows
   (16 positions x 16 dims) and one ``MM`` per dimension block (``D / 16``), accumulated; for
   the last block one more ``LW`` + ``MM``: the mask block (rows ``r >= L - 16 (nb - 1)`` all
   127, the others 0; ``mask_block``) times the constant vector -128, ``mask_mms`` times
   (accumulated), so a reserved position gets ``mask_mms * MASK_BIAS`` (``MASK_BIAS`` =
   -260,096; its zero-filled row scores 0).  The mask block's 16 rows are
   read from 32 constant rows (16 zero, 16 of 127) at an offset a base register holds
   (``16 - (L mod 16)``): no parameter entry depends on L.
2. ``z8 = requant(S + coarse_bias, 1, coarse_shift)``: a coarse int8 score,
   ``floor((S + b) / 2**k)``; a reserved position's is -128 (``HeadSpec.calibrate`` checks
   it).  VOP, entry *coarse* (no table), one per position block.
3. ``zmax = max_j z8[j]``: lane-wise maxima of the blocks, then of the lanes (rotations by
   8, 4, 2, 1): the SXM's ``MAX`` (``docs/isa.md``; ``docs/numerics.md``, "Attention").
4. ``z = requant(S - 2**k zmax + fine_bias, m_z, s_z)``; ``e' = EXP[z]``.  MXM (the other
   one): ``MM`` of a vector of ``zmax`` with a block of -128s (``neg_max_block``),
   ``2**k / 2048`` times if ``k > 11``, gives ``-2**k zmax`` in every lane; VOP with ``ADD``
   (A = S re-emitted, B = that), entry *fine* and the exp table.  The largest score's code
   lands within ``2**k`` accumulator units below 127; a reserved position's is -128, so its
   ``e'`` is -127.
5. ``e = e' + 127`` (0..254; ``EXP`` stores ``e - 127``, so ``e`` has 8 bits in an int8):
   ``E = sum_j e_j`` and ``U[d] = sum_j V[j, d] e_j`` (int32, exact): ``MM`` of ``e'`` and of
   the constant vector 127 with a block of ones (``E`` in every lane) and with each
   transposed V block (``V^T``: 16 dims x 16 positions), accumulated over the blocks.  A
   reserved position has ``e = 0`` and adds nothing, whatever its V row holds.
6. ``y = U / E`` in the output's units, by octaves of ``E``: for ``i`` in ``octaves``,
   ``c_i = requant(E - 191 * 2**i - 2**(i-1), 1, i) = floor(E / 2**i) - 191``,
   ``a_i = RECIP[c_i]`` (non-zero only for ``floor(E / 2**i)`` in 64..127: exactly one
   octave), ``b_i = requant(U, m_b[i], s_b[i])``, ``y_i = requant(a_i * b_i, m_c, s_c)``:
   one VOP with ``GATE`` per octave and dimension block (A = E, B = U from the other MXM),
   entry *octave i*, the reciprocal table.  ``y = sum_i y_i`` (``MM`` of each ``y_i`` with
   an identity block, accumulated; a VOP with multiplier 1 and shift 0 makes it int8).

:class:`HeadSpec` holds a head's parameters (:meth:`HeadSpec.calibrate` from float
calibration inputs), :func:`head_int` runs the step and :func:`head_float` is the float
reference.  :class:`Variant` selects the options that were evaluated against the chosen
pipeline: a calibrated static offset or an exact int32 maximum instead of step 3, a 7-bit
exp, and other normalisations (exact division, one reciprocal table, probabilities first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from lpu_arch.vxm import TABLE_SIZE

from firmware_gen.golden.quantise import (INT8_MAX, NumericsError, add_int32, check_finite, check_int8,
                                          elementwise_multiply, matmul_int32, quantise_activations, quantise_scale,
                                          range_scale, requantise, round_half_away_from_zero, sat8)

BLOCK = 16                      # positions per block: the default tile's lanes
MASK_BIAS = -128 * 127 * BLOCK  # a reserved position's score offset: the mask block's row times -128
E_TOP = {8: 254, 7: 127}        # e of the largest score (exp table with e_bits 8 or 7)
E_SHIFT = {8: 127, 7: 0}        # the table stores e - E_SHIFT
MANTISSA_OFFSET = 191           # c_i = floor(E / 2**i) - 191: the octave's 64..127 are codes -127..-64
RECIP_NUM = 127 * 64.5          # RECIP[c] = RECIP_NUM / (mantissa + 1/2): 127 at mantissa 64
OCTAVE_GAIN = 1.5               # b_i spans |y| * 1.5 * (mantissa + 1/2) / 128: the gain of b over y
OUT_HEADROOM = 2.0              # output scale: 2 x the largest |output| of the calibration text
COARSE_SPAN = 4.0               # nats: the coarse score range extends the calibrated maxima by this much
MAX_CONTEXT = 64
OFFSETS = ("max", "max32", "static")
NORMALISATIONS = ("octave", "exact", "table", "probabilities")


def exp_step(e_bits=8):
    """Nats per fine score code: ``EXP[-127]`` is ``round(e_top * exp(-254 step)) = round(1/2) = 1``."""
    return math.log(2 * E_TOP[e_bits]) / 254


@lru_cache(maxsize=None)
def exp_table(e_bits=8):
    """The exp table: entry ``z`` (int8 byte) is ``round(e_top * exp((z - 127) * step)) - shift``;
    ``z = -128`` (masked, or beyond the window) is ``-shift``, i.e. ``e = 0``."""
    z = np.arange(TABLE_SIZE).astype(np.int8).astype(np.float64)
    e = round_half_away_from_zero(E_TOP[e_bits] * np.exp((z - 127) * exp_step(e_bits)))
    e[z == -128] = 0
    return _frozen(sat8(e - E_SHIFT[e_bits]))


@lru_cache(maxsize=None)
def recip_table():
    """The reciprocal table of step 6: code ``c`` in -127..-64 (mantissa ``c + 191`` in 64..127)
    gives ``round(RECIP_NUM / (mantissa + 1/2))`` (127..64); every other code gives 0."""
    c = np.arange(TABLE_SIZE).astype(np.int8).astype(np.int64)
    mant = c + MANTISSA_OFFSET
    own = (mant >= 64) & (mant <= 127)
    return _frozen(sat8(np.where(own, round_half_away_from_zero(RECIP_NUM / (mant + 0.5)), 0)))


def _frozen(a):
    a.flags.writeable = False
    return a


def octaves_for(max_context, e_bits=8, offset="max"):
    """The octaves ``i`` whose ``[64 * 2**i, 128 * 2**i)`` cover ``E``: from the largest score's
    ``e_top`` (a static offset: from 64) to ``e_top * max_context``."""
    lo, hi = (E_TOP[e_bits] if offset != "static" else 64), E_TOP[e_bits] * max_context
    return tuple(range(int(math.floor(math.log2(lo / 64))), int(math.floor(math.log2(hi / 64))) + 1))


def mask_block(valid):
    """The last block's mask: rows ``valid..BLOCK-1`` (reserved positions) all 127, the others 0;
    times the constant vector -128 it adds ``MASK_BIAS`` to a reserved position's score."""
    return np.where(np.arange(BLOCK)[:, None] >= valid, INT8_MAX, 0) * np.ones(BLOCK, np.int64)


@dataclass(frozen=True)
class Variant:
    """Which pipeline :func:`head_int` runs: the chosen one by default (``offset='max'``,
    ``e_bits=8``, ``normalise='octave'``), or an evaluated alternative."""
    offset: str = "max"             # 'max' (coarse int8 max, step 3), 'max32' (exact int32 max), 'static'
    e_bits: int = 8                 # 8: e in 0..254 (table holds e - 127); 7: e in 0..127
    normalise: str = "octave"       # 'octave', 'exact' (float division), 'table', 'probabilities'

    def __post_init__(self):
        if self.offset not in OFFSETS or self.normalise not in NORMALISATIONS or self.e_bits not in E_TOP:
            raise NumericsError(f"unknown variant {self}: offset in {OFFSETS}, e_bits 7 or 8, "
                                f"normalise in {NORMALISATIONS}")
        if self.normalise == "probabilities" and self.e_bits != 7:
            raise NumericsError("normalise='probabilities' multiplies e by the reciprocal: it needs e_bits=7")


@dataclass(frozen=True)
class HeadSpec:
    """One head's static parameters: int8 scales of q, k, v and of the output, the
    requantisations and biases of steps 2, 4 and 6 (``docs/numerics.md``, "Attention")."""
    D: int
    q_scale: float
    k_scale: float
    v_scale: float
    out_scale: float
    coarse_shift: int           # k: z8 = floor((S + coarse_bias') / 2**k), 0..15
    coarse_bias: int            # bias_a of the coarse entry (includes -2**(k-1): requant then floors)
    fine_rq: tuple              # (m_z, s_z): accumulator units -> fine codes of exp_step nats
    fine_bias: int              # bias_a of the fine entry ('max')
    top_bias: int               # 'max32': z = requant(S - max S + top_bias)
    static_bias: int            # 'static': z = requant(S + static_bias)
    octaves: tuple              # the i of step 6
    b_rq: tuple                 # per octave i (indexed by i): (m, s) of b_i = requant(U)
    c_rq: tuple                 # (m, s) of y_i = requant(a_i * b_i)
    variant: Variant = Variant()
    max_context: int = MAX_CONTEXT
    mask_mms: int = 1           # MMs of the mask block (step 1)

    @property
    def score_unit(self):
        """Nats of one accumulator unit of S (``q_scale * k_scale / sqrt(D)``)."""
        return self.q_scale * self.k_scale / math.sqrt(self.D)

    @property
    def ratio(self):
        """``v_scale / out_scale``: y = U / E times this."""
        return self.v_scale / self.out_scale

    @classmethod
    def calibrate(cls, q, k, v, *, variant=Variant(), max_context=MAX_CONTEXT, out_headroom=OUT_HEADROOM,
                  gain=OCTAVE_GAIN, stale_rows=False):
        """A head's parameters from float calibration inputs ``q``, ``k``, ``v`` (T, D), position
        ``t`` attending to ``0..t``: per-tensor scales ``max|x| / 127``; the coarse range the
        per-position score maxima widened by ``COARSE_SPAN`` nats each way; the output scale
        ``out_headroom`` times the largest |output| over 127.  ``stale_rows``: the reserved rows
        of the last block may hold any int8 keys (an earlier run's later positions, as the token
        loop leaves them), so the mask must saturate whatever ``K q`` they score: ``mask_mms``
        with the largest such score's margin."""
        q, k, v = (check_finite(a, n, matrix=True) for a, n in ((q, "q"), (k, "k"), (v, "v")))
        if not q.shape == k.shape == v.shape or q.shape[1] % BLOCK:
            raise NumericsError(f"q, k and v must be T x D with D a multiple of {BLOCK}: got "
                                f"{q.shape}, {k.shape}, {v.shape}")
        D = q.shape[1]
        sq, sk, sv = range_scale(q), range_scale(k), range_scale(v)
        u = sq * sk / math.sqrt(D)
        scores = q @ k.T / math.sqrt(D)
        causal = np.tril(np.ones(scores.shape, bool))
        row_max = np.where(causal, scores, -np.inf).max(axis=1)
        outs = np.stack([head_float(q[t], k[:t + 1], v[:t + 1]) for t in range(len(q))])
        so = out_headroom * range_scale(outs)
        delta = exp_step(variant.e_bits)
        if u >= delta:
            raise NumericsError(f"score unit {u:.3g} nats is not below the exp step {delta:.3g}: scales too coarse")
        lo, hi = row_max.min() - COARSE_SPAN, row_max.max() + COARSE_SPAN
        shift = max(0, math.ceil(math.log2((hi - lo) / (254 * u))))
        if shift > 15:
            raise NumericsError(f"coarse shift {shift} > 15: the score range is {2 ** shift} accumulator units per "
                                f"coarse code; -2**shift needs more than 16 MMs of a row of -128s")
        b8 = -int(round_half_away_from_zero((lo + hi) / 2 / u))
        fine = quantise_scale(u / delta)
        top = int(round_half_away_from_zero(127 * (1 << fine[1]) / fine[0]))
        octaves = octaves_for(max_context, variant.e_bits, variant.offset)
        b_rq = tuple(quantise_scale(gain * sv / so / (128 << i)) for i in range(max(octaves) + 1))
        spec = cls(D, sq, sk, sv, so, shift, b8 - ((1 << shift) >> 1), fine, top + b8 - (1 << shift) + 1, top,
                   top - int(round_half_away_from_zero(row_max.max() / u)), octaves, b_rq,
                   quantise_scale(128 / (gain * RECIP_NUM)), variant, max_context)
        extra = D * 128 * 128 if stale_rows else 0          # the largest K q of int8 rows
        for n in range(1, 17):
            if spec.mask_saturates(n, extra):
                return replace(spec, mask_mms=n)
        raise NumericsError(f"16 MMs of the mask ({16 * MASK_BIAS}) do not saturate the code of a reserved "
                            f"position: the score unit {u:.3g} nats is too small")

    def mask_saturates(self, mms, extra=0):
        """Whether ``mms`` MMs of the mask make a reserved position (zero-filled row: ``S = mms *
        MASK_BIAS``; a row scoring up to ``extra``: ``S = mms * MASK_BIAS + extra``) code to -128 in
        step 2 and, whatever ``zmax``, in step 4 (with a static offset: its one requantisation)."""
        S = mms * MASK_BIAS + extra
        checks = [(S + self.coarse_bias, 1, self.coarse_shift)]
        if self.variant.offset == "max":
            checks.append((S + (128 << self.coarse_shift) + self.fine_bias, *self.fine_rq))
        elif self.variant.offset == "static":
            checks.append((S + self.static_bias, *self.fine_rq))
        return all(int(requantise(acc, m, s)) == -128 for acc, m, s in checks)

    def quantise(self, q, K, V):
        """int8 ``q``, ``K``, ``V`` at the head's scales (``quantise_activations``: clamped to +-127)."""
        return tuple(quantise_activations(a, s)[0] for a, s in ((q, self.q_scale), (K, self.k_scale),
                                                                 (V, self.v_scale)))


@dataclass
class Stages:
    """The values of one step (``head_int``), lane by lane, for tests and pictures."""
    S: np.ndarray           # int32 scores, nb * BLOCK lanes
    z8: np.ndarray | None   # coarse codes ('max')
    zmax: int | None        # their maximum ('max')
    z: np.ndarray           # fine codes
    e: np.ndarray           # the exp table's outputs e' (e = e' + E_SHIFT)
    E: int                  # sum of e
    U: np.ndarray           # (D,) int32: sum_j V[j] e_j
    codes: dict             # step 6: octave i -> (c_i, a_i)
    y: np.ndarray           # (D,) int8 output


def neg_max_block(shift):
    """``(block, mms)``: ``mms`` MMs of ``block`` (every row the same) turn a vector of ``zmax``
    into ``-2**shift * zmax`` in every lane; the row holds one ``-2**shift`` (shift below 7) or
    up to 16 entries of -128, and ``mms`` is ``2**shift / 2048`` beyond 11."""
    n = 1 << shift
    mms = max(1, n // (128 * BLOCK))
    row = np.zeros(BLOCK, np.int64)
    row[:max(1, n // mms // 128)] = -min(n, 128)
    return np.tile(row, (BLOCK, 1)), mms


def _scores(K, q, length, mms):
    """Step 1: ``S = K q``, the last block plus its mask block times the vector -128."""
    S = matmul_int32(K, q)
    last = slice(len(K) - BLOCK, len(K))
    S[last] += mms * matmul_int32(mask_block(length - last.start), np.full(BLOCK, -128))
    return S


def _fine_codes(spec, S, length):
    """Steps 2-4: the fine codes z (and z8, zmax for the 'max' offset).  'max32' is the ideal
    int32 maximum of the valid scores, reserved positions set to -128."""
    off, (m, s) = spec.variant.offset, spec.fine_rq
    if off == "static":
        return requantise(add_int32(S, spec.static_bias), m, s), None, None
    if off == "max32":
        z = requantise(S - S[:length].max() + spec.top_bias, m, s)
        return np.where(np.arange(len(S)) < length, z, -128), None, None
    z8 = requantise(add_int32(S, spec.coarse_bias), 1, spec.coarse_shift)
    zmax = int(z8.max())
    block, mms = neg_max_block(spec.coarse_shift)
    neg = mms * matmul_int32(block, np.full(BLOCK, zmax))[0]
    return requantise(add_int32(add_int32(S, neg), spec.fine_bias), m, s), z8, zmax


def octave_codes(E, i):
    """Step 6's code of octave ``i`` for sums ``E`` (int or array): ``floor(E / 2**i) - 191``
    saturated (``requant(E - 191 * 2**i - 2**(i-1), 1, i)``)."""
    return requantise(np.asarray(E) - MANTISSA_OFFSET * (1 << i) - ((1 << i) >> 1), 1, i)


def _octaves(spec, E, U):
    """Step 6: y = sum over octaves of requant(RECIP[c_i] * requant(U, b_rq[i]), c_rq)."""
    table, total, codes = recip_table(), np.zeros(spec.D, np.int64), {}
    for i in spec.octaves:
        c = int(octave_codes(E, i))
        a = int(table[c & 0xFF])
        codes[i] = (c, a)
        total += elementwise_multiply(a, requantise(U, *spec.b_rq[i]), *spec.c_rq)
    return requantise(total, 1, 0), codes


def _one_table(spec, E, U, blocks):
    """'table': a = round(127 / c) of one int8 code c of E (scaled by the block count), b = U in
    int8, y = requant(a * b, 1, 0)."""
    top = E_TOP[spec.variant.e_bits] * BLOCK * blocks
    c = int(requantise(E, *quantise_scale(127 / top)))
    a = int(round_half_away_from_zero(127 / c)) if c > 0 else 0
    b = requantise(U, *quantise_scale(spec.ratio / top)).astype(np.int64)
    return requantise(a * b, 1, 0), {0: (c, a)}


def _probabilities(spec, e, E, V, blocks):
    """'probabilities' (e_bits 7): p = requant(e * a, 1/kappa) with a as in 'table', then
    y = requant(V^T p, ratio / 127)."""
    top = E_TOP[7] * BLOCK * blocks
    c = int(requantise(E, *quantise_scale(127 / top)))
    a = int(round_half_away_from_zero(127 / c)) if c > 0 else 0
    p = requantise(e * a, *quantise_scale(127 / top)).astype(np.int64)
    return requantise(matmul_int32(V.T, p), *quantise_scale(spec.ratio / 127)), {0: (c, a)}


def _check_step(spec, q, K, V, length):
    q, K, V = check_int8(q, "q"), check_int8(K, "K"), check_int8(V, "V")
    length = len(K) if length is None else int(length)
    if q.shape != (spec.D,) or K.ndim != 2 or K.shape[1] != spec.D or K.shape != V.shape:
        raise NumericsError(f"q must be ({spec.D},) and K, V R x {spec.D}: got {q.shape}, {K.shape}, {V.shape}")
    if not 1 <= length <= min(len(K), spec.max_context):
        raise NumericsError(f"length {length} must be in 1..{min(len(K), spec.max_context)} (the rows of K and "
                            f"the head's max_context {spec.max_context})")
    rows = -(-length // BLOCK) * BLOCK
    pad = np.zeros((max(0, rows - len(K)), spec.D), np.int64)
    return q, np.vstack([K, pad])[:rows], np.vstack([V, pad])[:rows], length


def head_int(spec: HeadSpec, q, K, V, length=None) -> Stages:
    """One decode step of one head: int8 ``q`` (D,), cached int8 ``K`` and ``V`` (R, D); positions
    ``0..length-1`` (default R) attend, the rest of their blocks are reserved (rows beyond R read
    as zeros, as the program zero-fills them) and masked.  Returns every stage; ``stages.y`` is
    the int8 output at ``spec.out_scale``."""
    q, K, V, length = _check_step(spec, q, K, V, length)
    blocks, var = len(K) // BLOCK, spec.variant
    S = _scores(K, q, length, spec.mask_mms)
    z, z8, zmax = _fine_codes(spec, S, length)
    e = exp_table(var.e_bits)[z.astype(np.int64) & 0xFF].astype(np.int64)
    shift = np.full(len(e), E_SHIFT[var.e_bits])
    ones = np.ones((1, len(e)), np.int64)
    E = int(matmul_int32(ones, e)[0] + matmul_int32(ones, shift)[0])
    U = matmul_int32(V.T, e) + matmul_int32(V.T, shift)
    if var.normalise == "octave":
        y, codes = _octaves(spec, E, U)
    elif var.normalise == "table":
        y, codes = _one_table(spec, E, U, blocks)
    elif var.normalise == "probabilities":
        y, codes = _probabilities(spec, e, E, V, blocks)
    else:
        y, codes = sat8(round_half_away_from_zero(U * spec.ratio / E) if E else U * 0), {}
    return Stages(S, z8, zmax, z, e, E, U, codes, np.asarray(y, np.int8))


def head_float(q, K, V):
    """Float64 causal attention of one query over ``K``, ``V`` (L, D): ``softmax(K q / sqrt(D)) V``."""
    q, K, V = (np.asarray(a, np.float64) for a in (q, K, V))
    s = K @ q / math.sqrt(len(q))
    p = np.exp(s - s.max())
    return p @ V / p.sum()
