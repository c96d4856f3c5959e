"""Tables that fit the terminal: columns are chosen by priority until the width is used up,
and text columns wrap instead of being cut. ``--wide`` shows every column, unwrapped.

At 80 columns ``lazarus dlq list`` shows the id, the job's name, the failed reason and
what else fits, and says how many columns it left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

CELL_PADDING = 3  # what a column adds beside its text in a SIMPLE_HEAD table


@dataclasses.dataclass(frozen=True)
class Column:
    """One column: its ``priority`` (1 is shown first), the narrowest it may be, and whether
    it takes the width that is left (``grow``: a text column that wraps)."""

    title: str
    priority: int
    min_width: int
    justify: Literal["left", "right"] = "left"
    no_wrap: bool = False
    grow: bool = False


NATURAL_CAP = 32  # a column that does not grow is never given more, and wraps beyond


def natural_widths(
    columns: Sequence[Column], rows: Sequence[Mapping[str, RenderableType]]
) -> dict[str, int]:
    """How wide each column wants to be: its widest cell or title, capped."""
    widths = {}
    for c in columns:
        cells = [_cell_len(row.get(c.title, "")) for row in rows]
        widths[c.title] = min(max([len(c.title), *cells]), NATURAL_CAP)
    return widths


def fit(
    columns: Sequence[Column], width: int, natural: Mapping[str, int], *, wide: bool = False
) -> list[Column]:
    """The columns to show in ``width`` characters, in their own order: by priority, each
    taking its natural width (a growing one its minimum) while they fit."""
    if wide:
        return list(columns)
    chosen: set[str] = set()
    used = 0
    for column in sorted(columns, key=lambda c: c.priority):
        own = column.min_width if column.grow else max(natural[column.title], column.min_width)
        if used + own + CELL_PADDING <= width or not chosen:  # the first is always shown
            chosen.add(column.title)
            used += own + CELL_PADDING
    return [c for c in columns if c.title in chosen]


def table(
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, RenderableType]],
    out: Console,
    *,
    wide: bool = False,
) -> tuple[Table, int]:
    """A table of ``rows`` (cells by column title) for ``out``, and how many columns it left
    out. With ``wide``, every column, unwrapped, widening ``out`` as far as they need."""
    natural = natural_widths(columns, rows)
    shown = fit(columns, out.width, natural, wide=wide)
    result = Table(box=box.SIMPLE_HEAD, expand=not wide and any(c.grow for c in shown))
    for c in shown:
        result.add_column(
            c.title, justify=c.justify, no_wrap=c.no_wrap or wide, overflow="fold",
            min_width=c.min_width if c.grow else max(natural[c.title], c.min_width),
            ratio=1 if c.grow and not wide else None,
        )  # fmt: skip
    for row in rows:
        result.add_row(*(row.get(c.title, "") for c in shown))
    if wide:
        widest = out.measure(result, options=out.options.update(width=10_000)).maximum
        out.width = max(out.width, widest)
    return result, len(columns) - len(shown)


def _cell_len(cell: RenderableType) -> int:
    if isinstance(cell, Text):
        return cell.cell_len
    return len(cell) if isinstance(cell, str) else 0


def hidden_note(count: int) -> Text | None:
    """The line that says columns were left out, or ``None``."""
    if count <= 0:
        return None
    noun = "column" if count == 1 else "columns"
    return Text(f"({count} more {noun} with --wide)", style="dim")
