"""What a reader checks by eye in a figure, as assertions on its drawn artists.

- `overlapping_texts`: every pair of visible texts (titles, axis and tick
  labels, legend entries, annotations) whose rendered boxes intersect, and
  every text a legend's frame covers outside that legend.
- `undrawn_legend_entries`: legend entries with nothing drawn for them inside
  the axes: a line whose points all fall outside the view, an empty bar, a
  proxy (no data) whose marker and dash no drawn line shares.
`drawn_figures` records every Figure saved while it is active, so a test reads
the figures the report code really made, not copies of them.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
from matplotlib.collections import Collection
from matplotlib.container import Container
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text


@contextlib.contextmanager
def drawn_figures():
    """Every Figure whose savefig runs inside the block, in order (the real savefig still writes the file)."""
    figures: list[Figure] = []
    original = Figure.savefig

    def recording(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    Figure.savefig = recording
    try:
        yield figures
    finally:
        Figure.savefig = original


def _tick_labels_in_view(axis) -> list[Text]:
    """matplotlib keeps labels for ticks past the view; only those inside it are drawn."""
    low, high = sorted(axis.get_view_interval())
    span = (high - low) * 1e-9
    labels = []
    for locs, ticks in ((axis.get_majorticklocs(), axis.get_major_ticks),
                        (axis.get_minorticklocs(), axis.get_minor_ticks)):
        for loc, tick in zip(locs, ticks(len(locs))):
            if low - span <= loc <= high + span:
                labels += [tick.label1, tick.label2]
    return labels


def _texts(figure: Figure) -> list[Text]:
    """The texts a reader sees: titles, axis labels, the tick labels drawn (in view), legends, annotations."""
    found = list(figure.texts)
    for axes in figure.axes:
        if not axes.get_visible():
            continue
        found += [axes.title, axes._left_title, axes._right_title, axes.xaxis.label, axes.yaxis.label, *axes.texts]
        for axis in (axes.xaxis, axes.yaxis):
            found += _tick_labels_in_view(axis)
        if axes.get_legend() is not None:
            found += [*axes.get_legend().get_texts(), axes.get_legend().get_title()]
    return [t for t in found if t.get_visible() and t.get_text().strip()]


def overlapping_texts(figure: Figure) -> list[tuple[str, str]]:
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(figure)]
    pairs = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]
    for axes in figure.axes:
        legend = axes.get_legend()
        if legend is None:
            continue
        frame, own = legend.get_frame().get_window_extent(renderer), {id(t) for t in legend.get_texts()}
        own.add(id(legend.get_title()))
        pairs += [("legend", t.get_text()) for t in _texts(figure)
                  if id(t) not in own and t.get_window_extent(renderer).overlaps(frame)]
    return pairs


def _points_inside(axes, artist: Line2D) -> bool:
    xy = np.column_stack([np.asarray(artist.get_xdata(), float), np.asarray(artist.get_ydata(), float)])
    if not xy.size:
        return False
    shown = artist.get_transform().transform(xy)
    box = axes.get_window_extent()
    return bool(np.any((shown[:, 0] >= box.x0 - 0.5) & (shown[:, 0] <= box.x1 + 0.5)
                       & (shown[:, 1] >= box.y0 - 0.5) & (shown[:, 1] <= box.y1 + 0.5)))


def _drawn(axes, handle) -> bool:
    box = axes.get_window_extent()
    if isinstance(handle, Line2D):
        if len(handle.get_xdata()):
            return _points_inside(axes, handle)
        marker, dash = handle.get_marker(), handle.get_linestyle()
        return any(_points_inside(axes, line) and line.get_marker() == marker and line.get_linestyle() == dash
                   for line in axes.lines if len(line.get_xdata()))
    if isinstance(handle, Container):
        return any(_drawn(axes, part) for part in handle if part is not None)
    if isinstance(handle, Patch):
        extent = handle.get_window_extent()
        return extent.width > 0 and extent.height > 0 and extent.overlaps(box)
    if isinstance(handle, Collection):
        return any(_points_inside(axes, Line2D(*np.asarray(path.vertices).T, transform=handle.get_transform()))
                   for path in handle.get_paths())
    raise TypeError(f"no check for a legend handle of type {type(handle).__name__}")


def undrawn_legend_entries(figure: Figure) -> list[str]:
    figure.canvas.draw()
    missing = []
    for axes in figure.axes:
        if axes.get_legend() is None:
            continue
        handles, labels = axes.get_legend_handles_labels()
        missing += [label for handle, label in zip(handles, labels) if not _drawn(axes, handle)]
    return missing
