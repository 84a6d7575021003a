"""Record: summary.json and paired_items.jsonl, and every stored record's schema version
(the run store itself is evals.store)."""
