"""Writes the three report files of a run directory from its stored records."""

from __future__ import annotations

from pathlib import Path

from evals.report._html import render_html
from evals.report._junit import render_junit
from evals.report._markdown import render_markdown
from evals.report._page import build_page
from evals.atomic_files import write_text_atomic
from evals.record.paired_item import read_paired_item_records
from evals.record.run_record import ITEMS_FILE, read_run_record

HTML_FILE = "report.html"
MARKDOWN_FILE = "summary.md"
JUNIT_FILE = "junit.xml"


def _write_atomic(path: Path, text: str) -> None:
    write_text_atomic(path, text)


def write_reports(run_dir: Path, max_flipped_items: int = 200) -> dict[str, Path]:
    """Reads run_dir/summary.json and paired_items.jsonl; writes report.html, summary.md and
    junit.xml next to them and returns their paths as {'html', 'markdown', 'junit'}.

    The HTML embeds at most `max_flipped_items` flipped items (worse ones first) and
    says how many it left out; the other two files hold no model text.
    """
    run_dir = Path(run_dir)
    if max_flipped_items < 0:
        raise ValueError(f"max_flipped_items must be 0 or more, got {max_flipped_items}.")
    record = read_run_record(run_dir)  # refuses a summary whose fields have the wrong shape
    page = build_page(record, read_paired_item_records(run_dir), max_flipped_items,
                      items_file_found=(run_dir / ITEMS_FILE).exists())
    texts = {"html": render_html(page), "markdown": render_markdown(page),
             "junit": render_junit(record)}
    written = {"html": run_dir / HTML_FILE, "markdown": run_dir / MARKDOWN_FILE,
               "junit": run_dir / JUNIT_FILE}
    for kind, path in written.items():
        _write_atomic(path, texts[kind])
    return written
