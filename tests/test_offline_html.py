"""The HTML report: one self-contained file that Chromium renders, whose figures are the
json report's figures, one for one.

The seed window, with a sweep so that every kind of picture is drawn. Chromium (Debian's
package, headless) dumps the page as it rendered it, and takes a screenshot of it.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from matplotlib import image
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.offline_support import analyze, analyze_json, chromium
from tests.otlp_file import write_json_lines
from tests.sdk import RESOURCE
from tests.seed_window import write_seed_window

SWEEP = ("--sweep", "breaker.min_calls=2,3,5")


class Figures(HTMLParser):
    """Every element marked ``data-figure``, with the text it shows."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []
        self._open: list[tuple[str, str | None, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open.append((tag, dict(attrs).get("data-figure"), []))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            name, figure, text = self._open.pop()
            if figure is not None:
                self.found.append((figure, "".join(text)))
            if self._open:
                self._open[-1][2].extend(text)
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][2].append(data)


def at(report: Any, path: str) -> Any:
    for part in path.split("."):
        report = report[int(part)] if isinstance(report, list) else report[part]
    return report


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("html")
    seed = write_seed_window(directory)
    page = directory / "report.html"
    result = analyze(str(seed), *SWEEP, "--format", "html", "--output", str(page))
    assert result.returncode == 0, result.stderr
    return page, analyze_json(str(seed), *SWEEP)


def test_the_page_needs_no_network(pages: tuple[Path, dict[str, Any]]) -> None:
    html = pages[0].read_text()
    assert "<script" not in html and "<link" not in html and "@import" not in html
    # The SVGs refer to their own glyphs and clip paths; nothing else is referred to.
    references = re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)|url\(([^)]*)\)""", html)
    assert references and all((a or b).startswith("#") for a, b in references)
    assert html.count("<svg") == 3 + 1 + 1  # three worst turns, the circuits, the sweep


def test_chromium_renders_the_json_figures(
    pages: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, report = pages
    result = chromium(page, tmp_path / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    parser = Figures()
    parser.feed(result.stdout.decode())
    shown = dict(parser.found)
    assert len(shown) > 60
    for path, text in shown.items():
        value = at(report, path)
        assert float(text.replace(",", "")) == pytest.approx(value, abs=0.05), path
    # The headline and the incident turn, as the reader sees them.
    assert shown["counterfactual.within_turns.count"] == str(
        report["counterfactual"]["within_turns"]["count"]
    )
    assert shown["turns.worst.0.dead_calls.count"] == "8"
    assert shown["roster.states.ambiguous.count"] == "21"
    assert "sweep.rows.2.good_calls_refused" in shown


def test_chromium_takes_a_screenshot(pages: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    result = chromium(
        pages[0], tmp_path / "profile", "--window-size=1200,2400", f"--screenshot={shot}"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (2400, 1200)
    assert pixels.std() > 0.05  # not a blank page
    red = (pixels[..., 0] > 0.6) & (pixels[..., 1] < 0.35) & (pixels[..., 2] < 0.35)
    assert red.sum() > 2000  # the dead calls' bars are drawn


def test_names_from_the_spans_are_only_text(tmp_path: Path) -> None:
    """A tool and server named to break out of the page, or of matplotlib's mathtext."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("hostile")
    hostile = '<img src=x onerror="alert(1)"> $\\oops{$ --><b>'
    for n in range(4):
        start = 1_787_011_200_000_000_000 + n * 60 * 10**9
        span = tracer.start_span("mcp.tool.call", start_time=start)
        span.set_attributes(
            {
                "mcp.tool.name": hostile,
                "mcp.server.name": hostile,
                "mcp.tool.outcome": "failed",
                "mcp.tool.error": "connection refused",
                "mcp.turn.id": hostile,
                "mcp.turn.round": n + 1,
            }
        )
        span.end(end_time=start + 10**9)
    provider.shutdown()
    path = write_json_lines(tmp_path / "t.json", [list(memory.get_finished_spans())])
    page = tmp_path / "r.html"
    result = analyze(str(path), "--format", "html", "-o", str(page))
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    assert "<img" not in html and "<b>" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html  # shown, as text
    dom = chromium(page, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0 and b"<img" not in dom.stdout and b"<b>" not in dom.stdout
