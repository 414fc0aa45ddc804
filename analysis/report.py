"""The HTML report: one self-contained file with the tables and the plots as base64 PNG.

No external stylesheet, script or image: the file can be mailed or attached to a ticket.
"""

from __future__ import annotations

import datetime
import html
from dataclasses import dataclass, field

import pandas as pd
from matplotlib.figure import Figure

from analysis.display import for_display, legend
from analysis.plots import data_uri
from analysis.sanitize import printable


def _text(value: object) -> str:
    """Text for the page: control characters escaped as visible ``\\x1b``, ``\\n`` (:func:`printable`),
    then HTML-escaped (cells come escaped from :func:`analysis.display.for_display`)."""
    return html.escape(printable(value))


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 13px; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; }
tr.failed td { color: #a00; background: #fff4f4; }
p.footer { color: #555; }
p.legend { color: #555; font-size: 12px; max-width: 70em; }
section#verdict { background: #f4f8ff; border: 1px solid #9bb; padding: 0.2em 1em; max-width: 70em; }
section#verdict p { margin: 0.4em 0; }
img { max-width: 100%; border: 1px solid #ddd; margin-bottom: 1em; }
"""


@dataclass
class Report:
    """What goes into the HTML file; :func:`render_html` lays it out."""

    title: str
    summary: str
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    """``(heading, frame)``; frames of runs (with ``status``) get failed rows marked."""
    figures: dict[str, Figure] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Plot name -> why it was skipped."""
    notes: list[str] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)
    """The lines the page opens with (:func:`analysis.headline.headline`): the winner, its 95%
    interval, the runner-up, whether the winner beats it; above the first figure."""


def html_table(df: pd.DataFrame) -> str:
    """``df`` (flat columns, index ignored) as an HTML table: display formatting, short headers,
    failed runs in class ``failed``."""
    shown = for_display(df)
    failed = df["status"].ne("ok").tolist() if "status" in df else [False] * len(df)
    head = "".join(f"<th>{_text(c)}</th>" for c in shown.columns)
    rows = []
    for bad, cells in zip(failed, shown.itertuples(index=False), strict=True):
        tds = "".join(f"<td>{_text(v)}</td>" for v in cells)
        rows.append(f'<tr class="failed">{tds}</tr>' if bad else f"<tr>{tds}</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"


def _figure_html(name: str, fig: Figure) -> str:
    return f'<figure><img alt="{_text(name)}" src="{data_uri(fig)}"></figure>'


def _plots_html(report: Report, skip: str | None) -> list[str]:
    """The Plots section: every figure but ``skip`` (the one drawn under the verdict), the skip reasons."""
    figures = {name: fig for name, fig in report.figures.items() if name != skip}
    out = ["<h2>Plots</h2>"] if figures or report.skipped else []
    for name, fig in figures.items():
        out.append(_figure_html(name, fig))
    for name, reason in report.skipped.items():
        out.append(f"<p>Skipped {_text(name)}: {_text(reason)}.</p>")
    return out


def _verdict_html(report: Report) -> tuple[list[str], str | None]:
    """The opening: the verdict's lines, then the first figure (the chart of the set-ups); the name of
    that figure, so that the Plots section does not draw it twice."""
    out = []
    if report.verdict:
        lines = "\n".join(f"<p>{_text(line)}</p>" for line in report.verdict)
        out.append(f'<section id="verdict">\n<h2>Verdict</h2>\n{lines}\n</section>')
    lead = next(iter(report.figures), None)
    if lead is not None:
        out.append(_figure_html(lead, report.figures[lead]))
    return out, lead


def render_html(report: Report) -> str:
    """The whole report as one HTML document (UTF-8 text): the title, the verdict (the winner, its
    interval, whether it beats the runner-up) and the first figure, then the tables, the other
    figures and the notes."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    opening, lead = _verdict_html(report)
    parts = [f"<h1>{_text(report.title)}</h1>", *opening]
    for heading, frame in report.tables:
        parts += [f"<h2>{_text(heading)}</h2>", html_table(frame)]
        if note := legend(list(frame.columns)):
            parts.append(f'<p class="legend">{_text(note)}</p>')
    parts += _plots_html(report, lead)
    parts += [f'<p class="footer">{_text(n)}</p>' for n in report.notes]
    footer = f"{report.summary}. Generated {when} by python -m analysis."
    parts.append(f'<p class="footer">{_text(footer)}</p>')
    body = "\n".join(parts)
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_text(report.title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
