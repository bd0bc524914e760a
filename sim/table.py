"""Tables laid out one way: Markdown for the bench's results, aligned text for ``lpu``.
The caller formats each cell; a text line may stop before the last columns (a header's
note), and is printed as it comes, so that a run prints each row as it checks it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One column of a :class:`Table`; ``width`` and ``gap`` are the text layout's."""
    head: str
    width: int = 0            # each cell padded to it (0: as they come; a wider cell is not cut)
    align: str = "<"          # "<" or ">": the text's padding and Markdown's alignment row
    gap: int | None = None    # spaces before the column (default: 1, none before the first)

    def __post_init__(self):
        if self.align not in ("<", ">"):
            raise ValueError(f"column {self.head!r}: align is '<' or '>', not {self.align!r}")


class Table:
    """Columns, left to right, laid out as Markdown or aligned text (a string: ``Column(it)``)."""

    def __init__(self, *columns: Column | str):
        self.columns = tuple(c if isinstance(c, Column) else Column(c) for c in columns)

    # ---- Markdown ----
    def markdown(self, rows: Iterable[Sequence]) -> list[str]:
        """The header, the alignment row and one line per row of cells."""
        return [*self.markdown_head(), *(self.markdown_row(*row) for row in rows)]

    def markdown_head(self) -> list[str]:
        """The Markdown header and alignment row (``---``, or ``---:`` for a right column)."""
        return [self.markdown_row(*(c.head for c in self.columns)),
                "|" + "|".join("---:" if c.align == ">" else "---" for c in self.columns) + "|"]

    def markdown_row(self, *cells) -> str:
        """One Markdown row of ``cells`` (``str`` of each), one per column."""
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)} columns")
        return "| " + " | ".join(str(v) for v in cells) + " |"

    # ---- text ----
    def head(self) -> str:
        """The text header: every column's title, padded as its cells are."""
        return self.line(*(c.head for c in self.columns))

    def line(self, *cells) -> str:
        """One text line of ``cells`` (``str`` of each), left to right; fewer cells than
        columns: the line ends after the last one given."""
        if len(cells) > len(self.columns):
            raise ValueError(f"a line of {len(cells)} cells in a table of {len(self.columns)} columns")
        out = []
        for k, (c, v) in enumerate(zip(self.columns, cells)):
            gap = (0 if k == 0 else 1) if c.gap is None else c.gap
            text = str(v)
            out.append(" " * gap + (text.rjust(c.width) if c.align == ">" else text.ljust(c.width)))
        return "".join(out)

    def text(self, rows: Iterable[Sequence], head: bool = True) -> list[str]:
        """The text header (unless not ``head``) and one line per row."""
        return ([self.head()] if head else []) + [self.line(*row) for row in rows]


def right(head: str, width: int = 0, gap: int | None = None) -> Column:
    """A right-aligned column (numbers)."""
    return Column(head, width, ">", gap)
