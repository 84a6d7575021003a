"""Reports of a finished run: report.html (self-contained), summary.md and junit.xml.

The last step of the data flow: reads only the stored run records (summary.json and
paired_items.jsonl), builds plain view-models of each section, then renders them
with templates kept in `templates/` (one per section). Nothing here reaches back
into the analysis or the engines.
"""

__all__ = ["HTML_FILE", "JUNIT_FILE", "MARKDOWN_FILE", "write_reports"]


def __getattr__(name: str):
    """The renderer is imported on first use (PEP 562): a submodule - the CI writes that a
    bad-input exit makes - is imported without the renderer and the analysis it reads."""
    if name in __all__:
        from evals.report import _outputs

        return getattr(_outputs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
