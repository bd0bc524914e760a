"""A flit's fields as the link hardware cuts them (``lpu_arch.c2c.flit_fields``)."""

from amaranth.lib import data

from lpu_arch.c2c import flit_bits, flit_fields


def flit_field(v, cfg, name):
    """Field ``name`` of flit ``v`` (``lpu_arch.c2c.flit_fields``)."""
    lsb, w = flit_fields(cfg)[name]
    return v[lsb:lsb + w]


def flit_body_layout(cfg):
    """A flit without its valid bit (what the elastic buffer holds): kind, payload, check.

    Field offsets are ``lpu_arch.c2c.flit_fields`` less the valid bit below them."""
    f = flit_fields(cfg)
    base = f["kind"][0]
    assert f["valid"] == (0, base), "the valid bit is the flit's lowest"
    fields = sorted((lsb, name, w) for name, (lsb, w) in f.items() if name != "valid")
    layout = data.StructLayout({name: w for _, name, w in fields})
    assert all(layout[name].offset == lsb - base for lsb, name, _ in fields)
    assert layout.size == flit_bits(cfg) - base
    return layout
