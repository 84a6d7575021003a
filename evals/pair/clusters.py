"""Cluster labels of a task's items, read from a field of lm-eval's logged documents
(`cluster: passage_id` in the config, `--cluster TASK=FIELD` for compare)."""

from __future__ import annotations

import numpy as np

from evals.errors import UserError
from evals.pair.pairing import PairedTask


def cluster_ids(paired: PairedTask, field: str, where: str) -> np.ndarray:
    """One label per paired item; a UserError names the first item without the field, and
    a field that puts every item in a cluster of its own (nothing to cluster)."""
    labels = []
    for doc_id, record in zip(paired.doc_ids, paired.baseline_records):
        doc = record.doc or {}
        if field not in doc:
            have = ", ".join(sorted(doc)) or "no document was logged"
            raise UserError(f"{where}: task `{paired.task}` doc_id {doc_id} has no field "
                            f"`{field}` to cluster by (its document has: {have}).")
        labels.append(str(doc[field]))
    values = np.asarray(labels, dtype=object)
    if len(set(labels)) == len(labels) and len(labels) > 1:
        raise UserError(f"{where}: task `{paired.task}`: field `{field}` puts every item in a "
                        "cluster of its own, so there is nothing to cluster; drop `cluster:` or "
                        "name the field that groups items (e.g. a passage id).")
    return values
