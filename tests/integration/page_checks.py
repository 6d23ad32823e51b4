"""What a person checks on a page by eye, as JavaScript run in the page: overlapping or clipped text, legends.

`LAYOUT` returns the pairs of visible text boxes that overlap (neither inside the
other), the text boxes whose content is wider or taller than the box, and, for
each uPlot chart, its series beside its legend's rows: the label, the colour and
dash of the line drawn against those of the legend's marker, and whether the
series has any value to draw against whether its row says "no data yet".
"""

from __future__ import annotations

TEXT = ("h1, h2, .note, .status, figcaption, .tile b, .tile span, .link-facts, .tables th, .tables td, #events li, "
        ".u-label")

LAYOUT = """
() => {
  const rgb = (colour) => {  // any CSS colour, as the browser computes it
    const probe = document.createElement("span");
    probe.style.color = colour;
    document.body.append(probe);
    const value = getComputedStyle(probe).color;
    probe.remove();
    return value;
  };
  const name = (e) => `${e.tagName.toLowerCase()}.${e.className} "${e.textContent.trim().slice(0, 40)}"`;
  const shown = [...document.querySelectorAll(%r)].filter((e) => e.getClientRects().length && e.textContent.trim());
  const boxes = shown.map((e) => [e, e.getBoundingClientRect()]);
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, ra] = boxes[i], [b, rb] = boxes[j];
      if (a.contains(b) || b.contains(a)) continue;
      const x = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const y = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (x > 1 && y > 1) overlaps.push([name(a), name(b)]);
    }
  }
  const clipped = shown.filter((e) => getComputedStyle(e).display !== "inline" &&
    (e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1)).map(name);
  const charts = [...document.querySelectorAll(".chart")].map((el) => {
    const plot = el.uplot;
    const rows = [...plot.root.querySelectorAll(".u-legend .u-series")];
    return {
      chart: el.id || el.closest("figure").dataset.link,
      series: plot.series.slice(1).map((s, i) => ({
        label: s.label, stroke: rgb(typeof s.stroke === "function" ? s.stroke(plot, i + 1) : s.stroke),
        dashed: Boolean(s.dash), drawn: s.show !== false && plot.data[i + 1].some((v) => v != null),
      })),
      legend: rows.map((row) => {
        const marker = getComputedStyle(row.querySelector(".u-marker"));
        return { label: row.querySelector(".u-label").textContent, stroke: marker.borderTopColor,
                 dashed: marker.borderTopStyle === "dashed", empty: row.classList.contains("empty") };
      }),
    };
  });
  return { overlaps, clipped, charts };
}
""" % TEXT


def legend_problems(charts: list[dict]) -> list[str]:
    """Each chart's legend must list exactly its series, each in the colour and dash it is drawn with, and
    mark as empty exactly those with nothing drawn."""
    problems = []
    for chart in charts:
        drawn = [{"label": s["label"], "stroke": s["stroke"], "dashed": s["dashed"], "empty": not s["drawn"]}
                 for s in chart["series"]]
        if drawn != chart["legend"]:
            problems.append(f"{chart['chart']}: legend {chart['legend']} but drawn {drawn}")
    return problems
