"""The VXM's architectural state: the parameter entry a VOP reads and the activation tables.

One parameter entry holds, per lane, the operands of one ``VOP`` (``docs/numerics.md``):
int32 biases of A and B, three requantisation (multiplier, shift) pairs and the activation
table (of ``TileConfig.vxm_tables``) the lane's ``TABLE`` step looks up.  A VOP that
names a base register reads entry ``param + offset``, so relocating an expert's entries
relocates its tables with them.  The host
writes an entry as ``PARAM_WORDS`` 32-bit words per lane (``hostmap.Region.VXM_PARAM``,
word ``(entry * lanes + lane) * PARAM_WORDS + k``); ``PARAM_FIELDS`` says where each field
sits.  The HDL decodes, the driver packs and the program checks ranges from this table.
"""

from __future__ import annotations

import numpy as np

TABLE_SIZE = 256                    # activation table entries (indexed by an int8's byte)
MULT_BITS, SHIFT_BITS = 15, 6       # requantisation multiplier and shift fields
MULT_MAX = (1 << MULT_BITS) - 1     # multipliers 1..MULT_MAX
SHIFT_MAX = 46                      # shifts 0..SHIFT_MAX (v * m needs 47 signed bits)
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# field -> (host word, lsb, width, signed, min, max, power-up value)
PARAM_FIELDS = {
    "bias_a": (0, 0, 32, True, INT32_MIN, INT32_MAX, 0),
    "bias_b": (1, 0, 32, True, INT32_MIN, INT32_MAX, 0),
    "m_a": (2, 0, MULT_BITS, False, 1, MULT_MAX, 1),
    "s_a": (2, 16, SHIFT_BITS, False, 0, SHIFT_MAX, 0),
    "m_b": (3, 0, MULT_BITS, False, 1, MULT_MAX, 1),
    "s_b": (3, 16, SHIFT_BITS, False, 0, SHIFT_MAX, 0),
    "m_c": (4, 0, MULT_BITS, False, 1, MULT_MAX, 1),
    "s_c": (4, 16, SHIFT_BITS, False, 0, SHIFT_MAX, 0),
    "table": (4, 24, 8, False, 0, 255, 0),     # below TileConfig.vxm_tables (Program.validate)
}
VXM_FIELDS = tuple(PARAM_FIELDS)    # the field order of Program.vxm_params' last axis
PARAM_WORDS = 1 + max(w for w, *_ in PARAM_FIELDS.values())
IDENTITY = tuple(f[6] for f in PARAM_FIELDS.values())   # bias 0, multiplier 1, shift 0


def lane_words(lane) -> list[int]:
    """The ``PARAM_WORDS`` host words of one lane of one entry (values in ``VXM_FIELDS`` order)."""
    words = [0] * PARAM_WORDS
    for (word, lsb, width, *_), v in zip(PARAM_FIELDS.values(), lane):
        words[word] |= (int(v) & ((1 << width) - 1)) << lsb
    return words


def param_words(params) -> list[int]:
    """Host words of a parameter memory, ``(entries, lanes, len(VXM_FIELDS))``; index = word
    address in ``Region.VXM_PARAM``."""
    return [w for entry in params for lane in entry for w in lane_words(lane)]


def table_words(tables) -> list[int]:
    """Host words of the activation tables, ``(tables, TABLE_SIZE)`` (or one table of
    ``TABLE_SIZE``); index = word address in ``Region.VXM_TABLE``: entry ``i`` of table
    ``t`` is word ``t * TABLE_SIZE + i``."""
    return [int(v) & 0xFF for row in np.reshape(np.asarray(tables, np.int64), (-1, TABLE_SIZE)) for v in row]


def table_bytes(table) -> np.ndarray:
    """An activation table (or tables) as the VXM holds it: each entry's byte (int8 values or
    E4M3 codes, given as -128..255) as int8."""
    return (np.asarray(table).astype(np.int64) & 0xFF).astype(np.uint8).astype(np.int8)


def identity_tables(cfg):
    """``(vxm_tables, TABLE_SIZE)`` int8: every table the identity (the power-up state)."""
    return np.tile(np.arange(TABLE_SIZE).astype(np.uint8).astype(np.int8), (cfg.vxm_tables, 1))


def reset_words(cfg) -> tuple[list[int], list[int]]:
    """The parameter and table words a VXM holds at power-up: identity entries, identity tables."""
    return (param_words([[IDENTITY] * cfg.lanes] * cfg.vxm_param_depth), table_words(identity_tables(cfg)))
