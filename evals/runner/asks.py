"""Questions a worker asks its parent while it runs, and the parent's answers.

The runner decides nothing about results: once its libraries are imported the worker asks
for its engine turn (the launcher grants it when the arm before it has ended, see
evals.runner.launch), before its first item it asks whether to go (the config audit may
still be running), and after each chunk of a sequential run it asks whether to stop. The
parent owns those decisions (evals.preflight.checks, evals.dispatch.arms). A question is one
stdout line, `[evals-ask] {json}`, which the launcher reads anyway; the answer is a JSON
file the launcher writes into the arm's `asks/` folder, which the worker waits for. An
answer of `null` means the parent has no say: the worker goes on as it would alone. A
worker started without `EVALS_ASK_DIR` asks nothing: it goes, and never stops early.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Callable

from evals.atomic_files import write_json_atomic

ASK_PREFIX = "[evals-ask] "
ASK_DIR_ENV = "EVALS_ASK_DIR"

# The questions' kinds, in the order a worker asks them
RESOLVE = "resolve"  # which configs to resolve for the config audit (an offline worker)
RESOLVED = "resolved"  # here they are
MODEL_READY = "model ready in"  # the worker's `[evals]` line once its engine has started
ENGINE_TURN = "engine"  # once imported, before it builds its model: may it?
GO = "go"  # its engine is ready, before its first item: go or stop?
LOOK = "look"  # after each chunk of a sequential run: stop early?
RELEASE = "release"  # its items are done, before its engine shuts down: may it now?
ENDED = "ended"  # not a question: the launcher tells the answerer the worker's output ended

Answerer = Callable[[dict], dict]
_ids = itertools.count(1)


# ---- worker side ----

def ask(question: dict, timeout: float | None = 3600.0) -> dict | None:
    """The parent's answer to `question` ({"kind": ..., ...}); None when nobody answers or
    the parent has no say. `timeout=None` waits as long as the parent lives (a worker
    started early waits for its engine turn while the arm before it runs)."""
    folder = os.environ.get(ASK_DIR_ENV)
    if not folder:
        return None
    ident = f"{os.getpid()}-{next(_ids)}"
    answer = Path(folder) / f"{ident}.json"
    print(ASK_PREFIX + json.dumps({"id": ident, **question}), flush=True)
    deadline = None if timeout is None else time.time() + timeout
    while not answer.exists():
        if deadline is not None and time.time() > deadline:
            raise TimeoutError(f"no answer to {question['kind']!r} in {timeout:.0f} s")
        time.sleep(0.05)
    data = json.loads(answer.read_text(encoding="utf-8"))
    answer.unlink(missing_ok=True)
    return data


# ---- parent side ----

def answer_line(line: str, folder: Path, answerer: Callable[[dict], dict | None]) -> None:
    """Answers one `[evals-ask]` line of the worker's output."""
    question = json.loads(line[len(ASK_PREFIX):])
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / f"{question['id']}.json", answerer(question))
