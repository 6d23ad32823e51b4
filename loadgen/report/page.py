"""OUT/index.html: the verdict, the table and every plot on one page, each captioned, with links to each run's files.

Under the table and under every figure: its caption (captions.py: what it shows,
what to look at) and, where the report was given one, a note saying why this
run's result differs from the PDD report's. The terms the table uses are defined
under it.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from pathlib import Path

from loadgen.report.captions import CAPTIONS, TERMS
from loadgen.report.runs import RunData, distinct_labels
from loadgen.report.table import html_table
from loadgen.report.verdict import verdict_lines

STYLE = """body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
figure{margin:1.5em 0}img{max-width:100%;border:1px solid #eee}figcaption,.caption{font-size:14px;margin:.4em 0}
.note{font-size:14px;background:#fff8e1;border-left:4px solid #f0b400;padding:.3em .6em;margin:.4em 0}
dl{font-size:13px}dt{font-weight:bold;float:left;clear:left;margin-right:.5em}dd{margin:0 0 .3em 0}"""


def _explained(key: str, notes: Mapping[str, str]) -> str:
    caption = f"<p class='caption'>{html.escape(CAPTIONS[key])}</p>" if key in CAPTIONS else ""
    note = f"<p class='note'>{html.escape(notes[key])}</p>" if notes.get(key) else ""
    return caption + note


def write_index(out_dir: Path, runs: list[RunData], images: dict[str, Path],
                notes: Mapping[str, str] | None = None) -> Path:
    notes = notes or {}
    sections = [f"<figure><h3>{html.escape(title)}</h3><img src='{html.escape(path.name)}' alt='{html.escape(title)}'>"
                f"<figcaption>{_explained(path.stem, notes)}</figcaption></figure>"
                for title, path in images.items()]
    links = []
    for run, label in zip(runs, distinct_labels(runs)):
        relative = os.path.relpath(run.path, out_dir)
        links.append(f"<li>{html.escape(label)}: <a href='{html.escape(relative)}/summary.json'>summary.json</a>, "
                     f"<a href='{html.escape(relative)}/requests.jsonl'>requests.jsonl</a></li>")
    verdict = "".join(f"<p>{html.escape(line)}</p>" for line in verdict_lines(runs))
    terms = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in TERMS.items())
    sla = runs[0].summary.sla if runs else None
    limits = f"<p class='caption'>SLA: TTFT &le; {sla.ttft_s:g} s and TPOT &le; {sla.tpot_s:g} s.</p>" if sla else ""
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>pdd-emu report</title><style>{STYLE}</style>"
            f"</head><body><h1>pdd-emu report</h1><h2>In short</h2>{verdict}"
            f"<h2>The comparison</h2>{html_table(runs)}{limits}{_explained('table', notes)}<dl>{terms}</dl>"
            f"<p><a href='report.md'>report.md</a></p><h2>Runs</h2><ul>{''.join(links)}</ul>"
            f"<h2>Plots</h2>{''.join(sections)}</body></html>\n")
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
