"""The run store: every finished run, kept for history, drift charts and arm reuse.

Layout under the root (default reports/store/, or $EVALS_STORE):

    index.sqlite                  runs, per-task deltas, arm task results, golden pins
    runs/<run_id>/manifest.json   config, effective engine configs, versions, model hashes,
                                  timings, verdict, per-task results (schema_version first)
    runs/<run_id>/items.parquet   one row per paired item, without the long texts

The manifests are the source of truth; the index is derived from them (plus golden
pins) and is rebuilt from them when it is missing or older than this suite.
"""

from evals.store._index import INDEX_SCHEMA_VERSION
from evals.store._items import ITEMS_SCHEMA, ITEMS_SCHEMA_VERSION
from evals.store._layout import DEFAULT_ROOT, ENV_VAR, default_root
from evals.store._manifest import MANIFEST_SCHEMA_VERSION
from evals.store._run_store import RunStore, open_store, record_in_store
from evals.store._types import RunEntry, SeriesPoint, StoredRun

__all__ = [
    "DEFAULT_ROOT",
    "ENV_VAR",
    "INDEX_SCHEMA_VERSION",
    "ITEMS_SCHEMA",
    "ITEMS_SCHEMA_VERSION",
    "MANIFEST_SCHEMA_VERSION",
    "RunEntry",
    "RunStore",
    "SeriesPoint",
    "StoredRun",
    "open_store",
    "record_in_store",
    "default_root",
]
