"""Every figure of the book twice: the column's layout, and one panel per row at a phone's width.

A phone shows the 7.5-inch column about half size, so 9 pt text reads as 6 px there. The same figure laid
out one panel per row, 4.2 inches wide, shows the same text at 10-11 px. A chapter's figures carry both as
a ``<picture>`` whose phone source the browser picks on a narrow screen (``chapter.start`` registers
``book_bundle`` for every figure, in place of the inline backend's PNG).
"""

from __future__ import annotations

import base64
import html
import io
import math
import struct
import textwrap
from contextlib import contextmanager

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.transforms import blended_transform_factory

from helpers.plotting import SMALLEST_POINTS, plotted_handles

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


def _reading_order(panels: list[plt.Axes]) -> list[tuple[int, int]]:
    """The grid's slots in the order a phone stacks them: row by row, or column by column where the
    legends sit under the bottom row only, one per column (each column's panels then end at their legend)."""
    slots = sorted({_slot(axis) for axis in panels})
    rows = {_slot(axis)[0] for axis in panels if axis.get_legend() is not None}
    bottom = max(row for row, _ in slots)
    if rows == {bottom} and len([a for a in panels if a.get_legend() is not None]) > 1:
        return sorted(slots, key=lambda slot: (slot[1], slot[0]))
    return slots


def _copy_label(source, axis: plt.Axes, which: str) -> None:
    """``source``'s text, size and visibility on ``axis``'s x or y label, where ``axis`` has none (a grid
    names its shared axes on its outer panels only; seaborn hides the inner panels' labels)."""
    label = getattr(axis, f"{which}axis").label
    if not label.get_text() or not label.get_visible():
        getattr(axis, f"set_{which}label")(source.get_text(), fontsize=source.get_fontsize())
        label.set_visible(True)


def _own_labels(panels: list[plt.Axes]) -> None:
    """Every panel with its own tick labels and axis labels: a grid shows them on its outer panels only,
    which on a phone can be a screen away."""
    shown = [axis for axis in panels if axis.yaxis.get_label_position() == "left"]  # no twin's right axis
    row_label = {_slot(a)[0]: a.yaxis.label for a in shown if a.get_ylabel() and a.yaxis.label.get_visible()}
    column_label = {
        _slot(a)[1]: a.xaxis.label for a in panels if a.get_xlabel() and a.xaxis.label.get_visible()
    }
    for axis in panels:
        row, column = _slot(axis)
        if axis in shown:
            axis.tick_params(axis="y", labelleft=True)
            if row in row_label:
                _copy_label(row_label[row], axis, "y")
        axis.tick_params(axis="x", labelbottom=True)
        if column in column_label:
            _copy_label(column_label[column], axis, "x")


def _restack(figure: Figure, panels: list[plt.Axes]) -> None:
    """Move the panels into one column (small multiples of more than 4 across into 2) in the order
    ``_reading_order`` gives, a twin axis with its host, each with its own labels (``_own_labels``), and
    make the figure tall enough for each panel to keep its height."""
    rows, columns = panels[0].get_subplotspec().get_gridspec().get_geometry()
    slots = _reading_order(panels)
    across = 2 if columns > 4 else 1
    stack = GridSpec(math.ceil(len(slots) / across), across, figure=figure)
    for spare in _spares(figure):  # hidden, but tight_layout needs every panel in one grid
        spare.set_subplotspec(stack[0])
    _own_labels(panels)
    for axis in panels:
        axis.set_subplotspec(stack[slots.index(_slot(axis))])
    _, height = figure.get_size_inches()
    panel_height = max(2.4, (height - 1.0) / rows)  # about an inch of titles and legend around a grid
    figure.set_size_inches(PHONE_INCHES, 0.8 + (panel_height + 0.8) * stack.nrows)  # each its own labels


NAME_CHARACTERS = 20  # a category name's longest line on a phone: "AWS p5en.48xlarge" stays whole


def _wrap_categories(panels: list[plt.Axes]) -> None:
    """A panel's y tick labels that are names (machines, not numbers) wrapped to lines of at most
    ``NAME_CHARACTERS``, only where one is longer: on a phone, names a third of the width wide leave the
    data a sliver."""
    for axis in panels:
        ticks, names = axis.get_yticks(), [label.get_text() for label in axis.get_yticklabels()]
        words = [name for name in names if name and not name.startswith("$")]  # not a typeset number
        if (
            words
            and len(words) == len([n for n in names if n])
            and any(len(w) > NAME_CHARACTERS for w in words)
        ):
            low, high = axis.get_ylim()
            size = axis.get_yticklabels()[0].get_fontsize()
            axis.set_yticks(ticks, [textwrap.fill(name, NAME_CHARACTERS) for name in names], fontsize=size)
            axis.set_ylim(low, high)


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
    panels from the plotted artists, in the legend's own number of columns where that fits the phone and
    in one otherwise (a legend fills its columns top to bottom: fewer columns would regroup its entries);
    the inches they take. The originals are kept aside, untouched, for ``phone_layout`` to put back."""
    renderer, below = figure.canvas.get_renderer(), 0.0
    sources, plotted = [*figure.legends, *moved], plotted_handles(figure.axes)
    figure.legends.clear()
    for legend in moved:
        legend.set_visible(False)
    inches_up = blended_transform_factory(figure.transFigure, figure.dpi_scale_trans)  # y: inches up
    for legend in sources:
        labels = [text.get_text() for text in legend.texts]
        handles = [
            plotted.get(label, stand_in)
            for label, stand_in in zip(labels, legend.legend_handles, strict=True)
        ]
        title = legend.get_title().get_text() or None
        size = legend.texts[0].get_fontsize() if legend.texts else "small"
        for across in dict.fromkeys((legend._ncols, 1)):
            phone = figure.legend(handles, labels, loc="lower center", ncol=across, frameon=False,
                                  fontsize=size, title=title, title_fontsize=size)  # fmt: skip
            if title:
                phone.set_title(_wrapped(phone.get_title(), figure.bbox.width * 0.95, renderer))
            if across == 1 or phone.get_window_extent(renderer).width <= figure.bbox.width:
                break
            phone.remove()
        phone.set_bbox_to_anchor((0.5, below), transform=inches_up)
        below += phone.get_window_extent(renderer).height / figure.dpi
    return below


def _kept(axis: plt.Axes) -> dict:
    """What ``phone_layout`` changes on a panel, to put back."""
    return {
        "axis": axis, "spec": axis.get_subplotspec(), "original": axis.get_position(original=True),
        "active": axis.get_position(), "ticks": (axis.xaxis.get_tick_params(), axis.yaxis.get_tick_params()),
        "labels": [(label, label.get_text(), label.get_fontsize(), label.get_visible())
                   for label in (axis.xaxis.label, axis.yaxis.label)],
        "y": (axis.yaxis.get_major_locator(), axis.yaxis.get_major_formatter(),
              [label.get_fontsize() for label in axis.get_yticklabels()[:1]], axis.get_ylim()),
    }  # fmt: skip


def _put_back(state: dict) -> None:
    axis = state["axis"]
    axis.set_subplotspec(state["spec"])
    axis.set_position(state["original"], which="original")
    axis.set_position(state["active"], which="active")
    for label, text, size, visible in state["labels"]:
        label.set_text(text)
        label.set_fontsize(size)
        label.set_visible(visible)
    xticks, yticks = state["ticks"]
    axis.tick_params(axis="x", labelbottom=xticks.get("labelbottom", True))
    axis.tick_params(axis="y", labelleft=yticks.get("labelleft", True))
    locator, formatter, sizes, limits = state["y"]
    if axis.yaxis.get_major_locator() is not locator:  # the names were wrapped (_wrap_categories)
        axis.yaxis.set_major_locator(locator)
        axis.yaxis.set_major_formatter(formatter)
        axis.tick_params(axis="y", labelsize=sizes[0])
        axis.set_ylim(limits)


@contextmanager
def phone_layout(figure: Figure):
    """``figure`` laid out for a phone while the block runs: ``PHONE_INCHES`` wide, its panels one per row
    (``_restack``), each with its own labels, long names and titles wrapped to the width, its legends below
    (``_legends_below``) and its title at the top; then put back as it was, to the pixel (a figure cannot
    be copied: matplotlib's bar labels hold functions that pickle refuses)."""
    panels = _panels(figure)
    size, parameters = figure.get_size_inches().copy(), vars(figure.subplotpars).copy()
    kept = [_kept(axis) for axis in [*panels, *_spares(figure)]]
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
            _own_labels(panels)
        _wrap_categories(panels)
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
        for state in kept:
            _put_back(state)


def picture_html(figure: Figure) -> str:
    """``figure`` as HTML for the book: the column's layout, and the phone's on a narrow screen."""
    wide = base64.b64encode(png(figure)).decode()
    with phone_layout(figure):
        small = base64.b64encode(png(figure)).decode()
    title = html.escape(figure._suptitle.get_text().replace("\n", " ")) if figure._suptitle else ""
    return (
        f'<picture><source media="{PHONE_SCREEN}" srcset="data:image/png;base64,{small}">'
        f'<img src="data:image/png;base64,{wide}" alt="{title}"></picture>'
    )


def book_bundle(figure: Figure) -> dict:
    """The HTML a chapter shows ``figure`` as (``picture_html``), as IPython's mime bundle."""
    return {"text/html": picture_html(figure)}
