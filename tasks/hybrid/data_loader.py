"""The multi-turn review task: conversations that re-read their own cached history.

Each conversation starts with the shared-prefix task's instruction block (a long system
prompt that spans many KV-cache blocks) and goes on turn by turn: turn k's prompt is the
block, the k earlier reviews with their labels, and the k-th review. So every turn's prompt
extends the one before it, as a chat client resends the conversation so far, and with
prefix caching each request re-reads the cached conversation. 150 conversations of 8 turns
over the 1,200 test reviews of tasks/embedded (each review is asked once, as the last turn
of one prompt); `conversation_id` groups the turns for clustered standard errors.
"""

from pathlib import Path

import datasets

DATA = Path(__file__).resolve().parent.parent / "embedded" / "data"
TURNS = 8


def multiturn(**_kwargs) -> datasets.DatasetDict:
    prefix = (DATA / "shared_prefix.txt").read_text(encoding="utf-8")
    test = [dict(row) for row in datasets.Dataset.from_json(str(DATA / "reviews_test.jsonl"))]
    rows = []
    for start in range(0, len(test) - TURNS + 1, TURNS):
        history = prefix
        for turn, review in enumerate(test[start:start + TURNS]):
            rows.append({"conversation_id": f"c{start // TURNS:03d}", "turn": turn,
                         "history": history, "text": review["text"], "label": review["label"]})
            history += f"Review: {review['text']}\nSentiment: {review['label']}\n\n"
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
