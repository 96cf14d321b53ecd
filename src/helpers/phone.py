"""Every figure of the book twice: the column's layout, and one panel per row at a phone's width.

A phone shows the 7.5-inch column about half size, so 9 pt text reads as 6 px there. The same figure laid
out one panel per row, 4.2 inches wide, shows the same text at 10-11 px. A chapter's figures carry both as
a ``<picture>`` whose phone source the browser picks on a narrow screen (``chapter.start`` registers
``book_bundle`` for every figure, in place of the inline backend's PNG).
"""

from __future__ import annotations

import base64
import io
import math
import struct
from contextlib import contextmanager

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.transforms import blended_transform_factory

from helpers.plotting import SMALLEST_POINTS

PHONE_INCHES = 4.2  # wide: a 390 px phone's 358 px column shows 9 pt text at about 10.5 px
PHONE_SCREEN = "(max-width: 600px)"  # the screens that get the phone layout
DPI = 100  # the inline backend's, which the book's sizes (plotting.SMALLEST_POINTS) assume
PHONE_COLUMN = 358  # px of a 390 px phone's screen that the book's column takes
SMALLEST_PX = SMALLEST_POINTS * DPI / 72  # the smallest text's height in the PNG
LEAST_SHOWN_PX = 9  # what the smallest text (plotting.SMALLEST_POINTS) may shrink to there
# The widest phone PNG that keeps it: wider ones are shown smaller than their pixels.
PHONE_PIXELS = int(PHONE_COLUMN * SMALLEST_PX / LEAST_SHOWN_PX)


def png_width(data: bytes) -> int:
    """The width in pixels of a PNG, from its header."""
    return struct.unpack(">I", data[16:20])[0]


def png(figure: Figure) -> bytes:
    """``figure`` as the notebook shows it: a PNG cut to what is drawn (``bbox_inches="tight"``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", facecolor="white")
    return buffer.getvalue()


def _panels(figure: Figure) -> list[plt.Axes]:
    """The figure's visible panels in a grid: no colour bars or hidden spares."""
    return [
        axis
        for axis in figure.axes
        if axis.get_visible() and axis.get_subplotspec() is not None and not hasattr(axis, "_colorbar")
    ]


def _spares(figure: Figure) -> list[plt.Axes]:
    """The hidden panels of a grid (a grid of 3 in 2 columns hides its fourth)."""
    return [axis for axis in figure.axes if not axis.get_visible() and axis.get_subplotspec() is not None]


def _slot(axis: plt.Axes) -> tuple[int, int]:
    spec = axis.get_subplotspec()
    return spec.rowspan.start, spec.colspan.start


def _wrapped(text, width: float, renderer) -> str:
    """``text``'s words in lines no wider than ``width`` pixels, measured as drawn."""
    original, lines = text.get_text(), []
    for line in original.split("\n"):
        current = ""
        for word in line.split(" "):
            trial = f"{current} {word}" if current else word
            text.set_text(trial)
            if current and text.get_window_extent(renderer).width > width:
                lines.append(current)
                current = word
            else:
                current = trial
        lines.append(current)
    text.set_text(original)
    return "\n".join(lines)


def _restack(figure: Figure, panels: list[plt.Axes]) -> None:
    """Move the panels into one column in reading order (small multiples of more than 4 across into 2),
    a twin axis with its host, each showing its own tick labels and axis labels (a grid shows them on its
    outer panels only), and make the figure tall enough for each panel to keep its height."""
    rows, columns = panels[0].get_subplotspec().get_gridspec().get_geometry()
    slots = sorted({_slot(axis) for axis in panels})
    across = 2 if columns > 4 else 1
    row_label = {_slot(axis)[0]: axis.yaxis.label for axis in panels if axis.get_ylabel()}
    column_label = {_slot(axis)[1]: axis.xaxis.label for axis in panels if axis.get_xlabel()}
    stack = GridSpec(math.ceil(len(slots) / across), across, figure=figure)
    for spare in _spares(figure):  # hidden, but tight_layout needs every panel in one grid
        spare.set_subplotspec(stack[0])
    for axis in panels:
        row, column = _slot(axis)
        axis.set_subplotspec(stack[slots.index((row, column))])
        if axis.yaxis.get_label_position() == "left":
            axis.tick_params(axis="y", labelleft=True)
            if not axis.get_ylabel() and row in row_label:
                axis.set_ylabel(row_label[row].get_text(), fontsize=row_label[row].get_fontsize())
        axis.tick_params(axis="x", labelbottom=True)
        if not axis.get_xlabel() and column in column_label:
            axis.set_xlabel(column_label[column].get_text(), fontsize=column_label[column].get_fontsize())
    _, height = figure.get_size_inches()
    panel_height = max(2.4, (height - 1.0) / rows)  # about an inch of titles and legend around a grid
    figure.set_size_inches(PHONE_INCHES, 0.8 + (panel_height + 0.8) * stack.nrows)  # each its own labels


def _moved_legends(figure: Figure, panels: list[plt.Axes], renderer) -> list:
    """The panels' legends that go under the figure on a phone: one drawn outside its panel (it would take
    the panel's width), or the only one of its figure (inside a panel half as wide it would hide data)."""
    legends = [axis.get_legend() for axis in panels if axis.get_legend() is not None]
    outside = [
        legend
        for legend in legends
        if legend.get_window_extent(renderer).x1 > legend.axes.get_window_extent(renderer).x1 + 1
    ]
    return legends if len(legends) == 1 else outside


def _legends_below(figure: Figure, moved: list) -> float:
    """Each figure legend, and each of ``moved`` (panels' legends, hidden meanwhile), drawn again under the
    panels in as many columns as fit the phone; the inches they take. The originals are kept aside,
    untouched, for ``phone_layout`` to put back."""
    renderer, below = figure.canvas.get_renderer(), 0.0
    sources = [*figure.legends, *moved]
    figure.legends.clear()
    for legend in moved:
        legend.set_visible(False)
    for legend in sources:
        handles, labels = legend.legend_handles, [text.get_text() for text in legend.texts]
        title = legend.get_title().get_text() or None
        size = legend.texts[0].get_fontsize() if legend.texts else "small"
        for across in range(max(1, len(labels)), 0, -1):
            phone = figure.legend(handles, labels, loc="lower center", ncol=across, frameon=False,
                                  fontsize=size, title=title, title_fontsize=size)  # fmt: skip
            if title:
                phone.set_title(_wrapped(phone.get_title(), figure.bbox.width * 0.95, renderer))
            if across == 1 or phone.get_window_extent(renderer).width <= figure.bbox.width:
                break
            phone.remove()
        inches_up = blended_transform_factory(
            figure.transFigure, figure.dpi_scale_trans
        )  # y: inches from the bottom
        phone.set_bbox_to_anchor((0.5, below), transform=inches_up)
        below += phone.get_window_extent(renderer).height / figure.dpi
    return below


@contextmanager
def phone_layout(figure: Figure):
    """``figure`` laid out for a phone while the block runs: ``PHONE_INCHES`` wide, its panels one per row,
    titles wrapped to the width, figure legends below in as many columns as fit; then put back as it was,
    to the pixel (a figure cannot be copied: matplotlib's bar labels hold functions that pickle refuses)."""
    panels = _panels(figure)
    size, parameters = figure.get_size_inches().copy(), vars(figure.subplotpars).copy()
    kept = [
        (axis, axis.get_subplotspec(), axis.get_position(original=True), axis.get_position(),
         axis.xaxis.label.get_text(), axis.yaxis.label.get_text(), axis.xaxis.label.get_fontsize(),
         axis.yaxis.label.get_fontsize(), axis.xaxis.get_tick_params(), axis.yaxis.get_tick_params())
        for axis in [*panels, *_spares(figure)]
    ]  # fmt: skip
    texts = [text for text in [figure._suptitle, *(axis.title for axis in panels)] if text is not None]
    words = [text.get_text() for text in texts]
    title_at = figure._suptitle.get_position() if figure._suptitle else None
    legends = list(figure.legends)
    shown = [(axis.get_legend(), axis.get_legend().get_visible()) for axis in panels if axis.get_legend()]
    try:
        if len({column for _, column in map(_slot, panels)}) > 1:
            _restack(figure, panels)
        else:
            figure.set_size_inches(PHONE_INCHES, size[1])
        renderer = figure.canvas.get_renderer()
        for text in texts:
            text.set_text(_wrapped(text, figure.bbox.width * 0.95, renderer))
        figure.canvas.draw()
        below = _legends_below(figure, _moved_legends(figure, panels, renderer))
        height = figure.get_size_inches()[1]
        figure.set_size_inches(PHONE_INCHES, height + below)
        total = height + below
        if figure._suptitle:  # at the top: tight_layout leaves it its height there, not 2 % of a tall figure
            figure._suptitle.set_y(1 - 0.05 / total)
        figure.tight_layout(rect=(0, (below + 0.1) / total if below else 0, 1, 1))
        yield figure
    finally:
        figure.legends[:] = legends
        for legend, visible in shown:
            legend.set_visible(visible)
        if title_at is not None:
            figure._suptitle.set_position(title_at)
        for text, original in zip(texts, words, strict=True):
            text.set_text(original)
        figure.set_size_inches(size)
        figure.subplotpars.update(**parameters)
        for axis, spec, original, active, xlabel, ylabel, xsize, ysize, xticks, yticks in kept:
            axis.set_subplotspec(spec)
            axis.set_position(original, which="original")
            axis.set_position(active, which="active")
            axis.set_xlabel(xlabel, fontsize=xsize)
            axis.set_ylabel(ylabel, fontsize=ysize)
            axis.tick_params(axis="x", labelbottom=xticks.get("labelbottom", True))
            axis.tick_params(axis="y", labelleft=yticks.get("labelleft", True))


def picture_html(figure: Figure) -> str:
    """``figure`` as HTML for the book: the column's layout, and the phone's on a narrow screen."""
    wide = base64.b64encode(png(figure)).decode()
    with phone_layout(figure):
        small = base64.b64encode(png(figure)).decode()
    title = figure._suptitle.get_text().replace("\n", " ").replace('"', "&quot;") if figure._suptitle else ""
    return (
        f'<picture><source media="{PHONE_SCREEN}" srcset="data:image/png;base64,{small}">'
        f'<img src="data:image/png;base64,{wide}" alt="{title}"></picture>'
    )


def book_bundle(figure: Figure) -> dict:
    """The HTML a chapter shows ``figure`` as (``picture_html``), as IPython's mime bundle."""
    return {"text/html": picture_html(figure)}
