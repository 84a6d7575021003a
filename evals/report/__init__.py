"""Reports of a finished run: report.html (self-contained), summary.md and junit.xml.

The last step of the data flow: reads only the stored run records (summary.json and
paired_items.jsonl), builds plain view-models of each section, then renders them
with templates kept in `templates/` (one per section). Nothing here reaches back
into the analysis or the engines.
"""

from evals.report._outputs import HTML_FILE, JUNIT_FILE, MARKDOWN_FILE, write_reports

__all__ = ["HTML_FILE", "JUNIT_FILE", "MARKDOWN_FILE", "write_reports"]
