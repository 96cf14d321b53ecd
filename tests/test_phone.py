"""helpers.phone: a figure's phone layout stacks its panels, keeps every label and legend readable within
a phone's width, and leaves the figure as it was; the book's HTML carries both layouts."""

import base64
import re

import matplotlib.pyplot as plt

from helpers import phone, plotting


def grid_figure():
    """Three panels in a 2 x 2 grid sharing y (the fourth hidden), one legend under them all."""
    figure, axes = plotting.panel_grid(3, columns=2, sharey=True)
    for number, axis in enumerate(axes):
        (line,) = axis.plot([1, 2, 3], [number, number + 1, number + 3], label="measured")
        axis.set_title(f"panel {number}")
    axes[2].set_xlabel("ranks")
    axes[0].set_ylabel("seconds per step")
    plotting.titled(figure, "a title long enough to need two lines on a phone's narrow screen", "Test CPU")
    plotting.legend_below(figure, [line] * 4, ["first label", "second label", "third", "fourth"], columns=4)
    return figure, axes


def test_the_phone_layout_stacks_the_panels_with_their_own_labels_and_puts_everything_back():
    figure, axes = grid_figure()
    desktop = phone.png(figure)
    assert [axis.get_subplotspec().get_geometry()[:2] for axis in axes] == [(2, 2)] * 3
    assert not axes[1].yaxis.get_tick_params().get("labelleft", True)  # the grid's inner panel hides them
    with phone.phone_layout(figure):
        assert [axis.get_subplotspec().get_geometry() for axis in axes] == [
            (3, 1, 0, 0),
            (3, 1, 1, 1),
            (3, 1, 2, 2),
        ]
        assert figure.get_size_inches()[0] == phone.PHONE_INCHES
        # every panel shows its y ticks and the row's label; the bottom row's x label reaches its column
        assert all(axis.yaxis.get_tick_params().get("labelleft", True) for axis in axes)
        assert [axis.get_ylabel() for axis in axes] == ["seconds per step", "seconds per step", ""]
        assert axes[0].get_xlabel() == "ranks" and axes[1].get_xlabel() == ""
        assert figure._suptitle.get_text().count("\n") >= 2  # its long first line wrapped
        (legend,) = figure.legends
        assert legend._ncols < 4  # four labels across are wider than the phone
        assert phone.png_width(phone.png(figure)) <= phone.PHONE_PIXELS
    assert phone.png(figure) == desktop
    assert figure._suptitle.get_text().count("\n") == 1 and figure.legends[0]._ncols == 4
    plt.close(figure)


def test_the_title_stays_above_the_first_panel_however_tall_the_stack():
    figure, axes = plotting.panel_grid(7, columns=2)  # as chapter 5's loss fits: seven panels, 23 inches
    for axis in axes:
        axis.plot([1, 2], [1, 2])
        axis.set_title("ConvNet\n(out of sample)")
    plotting.titled(figure, "fits", "Test CPU")
    with phone.phone_layout(figure):
        drawn = figure.canvas.get_renderer()
        assert figure._suptitle.get_window_extent(drawn).y0 >= axes[0].title.get_window_extent(drawn).y1
    plt.close(figure)


def test_a_single_panels_legend_goes_under_it_on_a_phone():
    figure, axis = plt.subplots(figsize=(7.5, 3))
    axis.plot([1, 2], [1, 2], label="one")
    axis.plot([1, 2], [2, 1], label="two")
    legend = axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside, right of the panel
    with phone.phone_layout(figure):
        assert not legend.get_visible()
        (below,) = figure.legends
        assert [text.get_text() for text in below.texts] == ["one", "two"]
    assert legend.get_visible() and figure.legends == []
    plt.close(figure)


def test_the_book_gets_both_layouts_and_a_phone_screen_picks_the_narrow_one():
    figure, _ = grid_figure()
    html = phone.picture_html(figure)
    narrow, wide = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    assert f'<source media="{phone.PHONE_SCREEN}" srcset="data:image/png;base64,{narrow}">' in html
    assert base64.b64decode(wide) == phone.png(figure)
    assert (
        phone.png_width(base64.b64decode(narrow))
        <= phone.PHONE_PIXELS
        < phone.png_width(base64.b64decode(wide))
    )
    assert 'alt="a title long enough' in html
    assert phone.book_bundle(figure) == {"text/html": html}  # what a chapter's figure displays as
    plt.close(figure)


def test_the_widest_phone_png_keeps_the_smallest_text_at_9_px():
    # 9 pt at 100 dpi is 12.5 px; a 358 px column shows a 497 px PNG at 358 / 497 of its size: 9.0 px
    assert phone.SMALLEST_PX == 12.5 and phone.PHONE_PIXELS == 497


def test_a_legend_drawn_again_keeps_the_plotted_markers_and_the_hidden_labels_show():
    """The expert's findings: a phone legend built from the legend's stand-ins drew error bars as plain
    lines; a label seaborn hides on inner panels was copied but stayed hidden."""
    figure, axes = plotting.panel_grid(2, columns=2, sharey=True)
    for axis in axes:
        axis.errorbar([1, 2], [1, 2], yerr=[0.1, 0.2], fmt="o", capsize=3, label="measured")
        axis.set_ylabel("seconds")
    axes[1].yaxis.label.set_visible(False)  # as seaborn's grids leave an inner panel's label
    plotting.legend_below(figure, *axes[0].get_legend_handles_labels())
    with phone.phone_layout(figure):
        (legend,) = figure.legends
        drawn = legend.legend_handles[0]
        assert not isinstance(drawn, plt.Line2D) or drawn.get_marker() == "o"  # not a bare line
        assert axes[1].yaxis.label.get_visible() and axes[1].get_ylabel() == "seconds"
    assert not axes[1].yaxis.label.get_visible()
    plt.close(figure)


def test_long_names_on_a_y_axis_wrap_and_each_column_ends_at_its_legend():
    figure, axes = plt.subplots(2, 2, figsize=(7.5, 5))
    names = ["the seed's 4x GTX 1080 Ti workstation", "AWS p5.48xlarge"]
    axes[0, 0].barh(names, [1, 2])
    for column in (0, 1):  # one legend per column, under the bottom row (chapter 4's bandwidth figure)
        axes[1, column].plot([1, 2], [1, 2], label=f"column {column}")
        axes[1, column].legend(loc="upper center", bbox_to_anchor=(0.5, -0.3))
    before = [label.get_text() for label in axes[0, 0].get_yticklabels()]
    with phone.phone_layout(figure):
        shown = [label.get_text() for label in axes[0, 0].get_yticklabels()]
        assert shown == ["the seed's 4x GTX\n1080 Ti workstation", "AWS p5.48xlarge"]
        # column by column: top left, bottom left (its legend), top right, bottom right (its legend)
        order = [axes[0, 0], axes[1, 0], axes[0, 1], axes[1, 1]]
        assert [axis.get_subplotspec().num1 for axis in order] == [0, 1, 2, 3]
    assert [label.get_text() for label in axes[0, 0].get_yticklabels()] == before
    plt.close(figure)


def test_a_one_column_stack_shows_its_shared_x_axis_on_every_panel():
    """Chapter 5's speed-up figure: two panels sharing x, labelled only at the bottom, a screen below the
    first panel on a phone."""
    figure, axes = plotting.panel_grid(2, columns=1, sharex=True)
    for axis in axes:
        axis.plot([1, 2], [1, 2])
    axes[1].set_xlabel("speed-up over one GPU (×)")
    with phone.phone_layout(figure):
        assert axes[0].xaxis.get_tick_params()["labelbottom"] and axes[0].get_xlabel() == axes[1].get_xlabel()
    assert not axes[0].xaxis.get_tick_params()["labelbottom"] and axes[0].get_xlabel() == ""
    plt.close(figure)
