"""OUT/index.html: the table and every plot on one page, with links to each run's files."""

from __future__ import annotations

import html
import os
from pathlib import Path

from loadgen.report.runs import RunData, distinct_labels
from loadgen.report.table import html_table

STYLE = """body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
figure{margin:1.5em 0}img{max-width:100%;border:1px solid #eee}"""


def write_index(out_dir: Path, runs: list[RunData], images: dict[str, Path]) -> Path:
    sections = [f"<figure><img src='{html.escape(path.name)}' alt='{html.escape(title)}'>"
                f"<figcaption><a href='{html.escape(path.name)}'>{html.escape(title)}</a></figcaption></figure>"
                for title, path in images.items()]
    links = []
    for run, label in zip(runs, distinct_labels(runs)):
        relative = os.path.relpath(run.path, out_dir)
        links.append(f"<li>{html.escape(label)}: <a href='{html.escape(relative)}/summary.json'>summary.json</a>, "
                     f"<a href='{html.escape(relative)}/requests.jsonl'>requests.jsonl</a></li>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>pdd-emu report</title><style>{STYLE}</style>"
            f"</head><body><h1>pdd-emu report</h1>{html_table(runs)}<p><a href='report.md'>report.md</a></p>"
            f"<h2>Runs</h2><ul>{''.join(links)}</ul><h2>Plots</h2>{''.join(sections)}</body></html>\n")
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
