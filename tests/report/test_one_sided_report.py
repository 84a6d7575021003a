"""One-sided evidence (evals.report._one_sided): forward vs reverse flips and the A/A flips
beside them, in the view-model, report.html and summary.md."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evals.record.paired_item import PairedItem, as_items, read_paired_item_records
from evals.record.run_record import read_summary
from evals.record.run_record_model import RunRecord
from evals.report._one_sided import (
    FLIP_MARGIN,
    OutputChanges,
    one_piece_added,
    one_sided_section,
    output_changes,
    reading,
    uncached_doc_ids,
)
from evals.runner.waves import group_waves


@pytest.mark.parametrize("forward, reverse, aa, expected", [
    (0, 0, None, "no flips"),
    (14, 0, None, "one-sided: 14 more forward than reverse flips"),  # the Qwen3.6 red: 14/32
    (3, 1, None, "both ways (within 2), as batch nondeterminism flips"),
    (2 + FLIP_MARGIN + 1, 2, 1, "one-sided: 3 more forward than reverse flips"),
    (5, 0, 6, "one-sided: 5 more forward than reverse flips, but no more than the A/A "
              "rerun's 6 flips"),
    (0, 4, None, "one-sided the other way: 4 more reverse flips"),
])
def test_reading_of_forward_reverse_and_aa_flips(forward, reverse, aa, expected):
    assert reading(forward, reverse, aa)[0] == expected


def test_the_margin_is_vllms_flip_margin():
    assert FLIP_MARGIN == 2
    assert reading(2, 0, None)[0].startswith("both ways")
    assert reading(3, 0, None)[0].startswith("one-sided")


def test_view_model_has_the_binary_tasks_with_their_flips(regression_run):
    summary = RunRecord.model_validate(read_summary(regression_run))
    section = one_sided_section(summary)
    rows = {r.task: r for r in section.rows}
    assert set(rows) == {"gsm8k_tiny", "boolq_tiny"}  # the continuous task has no flips
    gsm = rows["gsm8k_tiny"]
    assert (gsm.forward, gsm.reverse, gsm.aa_flips, gsm.css) == (12, 1, "not run", "worse")
    assert gsm.reading == "one-sided: 11 more forward than reverse flips"
    assert rows["boolq_tiny"].reading.startswith("both ways")
    assert not section.aa_run


def test_aa_flips_come_from_the_noise_floor(regression_run):
    summary = RunRecord.model_validate(read_summary(regression_run))
    tasks = [t.model_copy(update={"noise_flips": 13}) for t in summary.tasks]
    section = one_sided_section(summary.model_copy(update={"tasks": tasks}))
    gsm = next(r for r in section.rows if r.task == "gsm8k_tiny")
    assert section.aa_run and gsm.aa_flips == "13"
    assert gsm.reading == ("one-sided: 11 more forward than reverse flips, but no more than "
                           "the A/A rerun's 13 flips")


def test_report_and_summary_show_the_section(regression_run):
    html = (regression_run / "report.html").read_text(encoding="utf-8")
    assert '<section id="one-sided">' in html and 'href="#one-sided"' in html
    assert "one-sided: 11 more forward than reverse flips" in html
    assert "No A/A rerun in this run" in html
    markdown = (regression_run / "summary.md").read_text(encoding="utf-8")
    assert "| gsm8k\\_tiny | 60 | 12 | 1 | not run | " in markdown
    assert " | one-sided: 11 more forward than reverse flips |" in markdown


SESSION5 = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu-h200"
            / "session5")


def _items_at(path: Path) -> list[PairedItem]:
    """Recorded paired items, plain or gzipped JSON lines (a line without a task is a note
    or the header, not an item)."""
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return as_items([r for r in rows if "task" in r])


def _recorded_items(run: str, comparison: str) -> list[PairedItem]:
    """The changed items an H200 study recorded (vLLM, tiny hybrid)."""
    return _items_at(SESSION5 / run / "comparisons" / comparison / "flipped_items.jsonl")


@pytest.mark.parametrize("a, b, added", [
    (" 24", " 243", True),  # one more token at the end: the async overrun
    (" 112", " 1112", True),  # one more token inside (a repeated digit)
    ("x", "x", False),  # no change is no insertion
    (" 131", " 132", False),  # a digit rewritten
    (" 8157", " 815", True),  # the other way round: the baseline is the longer
    ("abc", "xabcx", False),  # two pieces inserted
    ("", "4821", True),
    # cut at the generation budget: the inserted token pushes the last one out
    (" 7743\nQ: vaul", " 77743\nQ: va", True),
    (" 5561\nQ: vaul", " 556561\nQ: v", True),
    (" 4743\nQ: vaul", " 4736\nQ: vaul", False),  # the cache-hit rewrite, same length
    (" 1979\nQ: give", " 1921\nQ: vaul", False),
    (" 1234", " 12x3", True),  # what is kept after the piece (3) is as long as the cut (4)
    (" 12345", " 12x3", False),  # kept 1 of the rest, 2 cut: not enough to tell
])
def test_one_piece_added(a, b, added):
    assert one_piece_added(a, b) is added
    assert one_piece_added(b, a) is added


H100 = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu-h100"


def test_budget_cut_async_overruns_read_as_text_added_the_cache_hit_rewrites_do_not():
    # one H100, vLLM 0.26.0, async scheduling on, 256-token blocks: two of the cold race's
    # forward flips are ' 7743\nQ: vaul' -> ' 77743\nQ: va', cut at the budget (session 33)
    on = _items_at(H100 / "session33" / "runs" / "gpu-recall-b256-151762b8"
                   / "paired_items.jsonl.gz")
    assert output_changes(on)["recall_cold_race_b256"] == OutputChanges(5, 2, 3)
    # async scheduling off, 192-token blocks: only the cache-hit rewrites (4743 -> ' 4736',
    # 1979 -> ' 1921') and other rewritten continuations are left (session 37)
    off = output_changes(_items_at(H100 / "session37" / "runs" / "gpu-recall-b192-sync-12b932a5"
                                   / "paired_items.jsonl.gz"))
    assert off == {"recall_cold_race_b192": OutputChanges(4, 0, 4),
                   "recall_multiturn_b192": OutputChanges(30, 0, 30)}


def test_the_h200_async_overruns_read_as_text_added_and_the_rewrite_as_rewritten():
    # prefix caching + MTP 2, async on: eight outputs, each the baseline's plus one token
    combo = output_changes(_recorded_items("gpu-study-hybrid-mtp-prefix-0ee1ef4e",
                                           "prefix_caching=on+decoding=mtp"))
    assert combo == {"tiny_addition": OutputChanges(changed=8, added=8, rewritten=0)}
    # MTP 3: four with a token added (two inside the answer), ' 131' -> ' 132' rewritten
    mtp3 = output_changes(_recorded_items("gpu-study-hybrid-variants-f483e4db", "prefix_mtp3"))
    assert mtp3 == {"tiny_addition": OutputChanges(changed=5, added=4, rewritten=1)}
    assert mtp3["tiny_addition"].text == "5: 4 text added, 1 rewritten"
    # async off: nothing changed, nothing to count
    assert output_changes(_recorded_items("gpu-study-hybrid-variants-f483e4db",
                                          "prefix_mtp2_sync")) == {}


def test_sampled_items_count_once_and_unchanged_items_not_at_all():
    def item(task, base, cand):
        return PairedItem(task=task, doc_id=0, metric="m", baseline=1.0, candidate=0.0,
                          target="t", prompt="p", baseline_prediction=None,
                          candidate_prediction=None, baseline_response=base,
                          candidate_response=cand)

    items = [item("s", [" 1", " 2"], [" 1", " 2x"]), item("s", [" 1", " 2"], [" 9", " 2x"]),
             item("s", " a", " a"), item("u", None, " a"), item("v", [" 1"], [" 1", " 2"])]
    assert output_changes(items) == {"s": OutputChanges(changed=2, added=1, rewritten=1)}
    assert OutputChanges(0, 0, 0).text == "0"


def test_report_and_summary_show_the_changed_outputs(regression_run):
    summary = RunRecord.model_validate(read_summary(regression_run))
    items = read_paired_item_records(regression_run)
    section = one_sided_section(summary, items)
    expected = output_changes(items)
    gsm = next(r for r in section.rows if r.task == "gsm8k_tiny")
    assert gsm.changes == expected["gsm8k_tiny"].text != "0"
    assert one_sided_section(summary).rows[0].changes == "-"  # no items given
    html = (regression_run / "report.html").read_text(encoding="utf-8")
    assert f"<td>{gsm.changes}</td>" in html and "text added" in html
    assert "<th>forward flips with no cache hit</th>" in html  # "-": this run had no waves
    assert f'<td>{gsm.changes}</td><td class="num">-</td>' in html
    markdown = (regression_run / "summary.md").read_text(encoding="utf-8")
    assert f"| not run | {gsm.changes} | - | one-sided" in markdown  # no waves: "-"


SESSION30 = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu-h100"
             / "session30" / "runs")
ASYNC_ON, ASYNC_OFF = "gpu-recall-b128-fb5d3db0", "gpu-recall-b128-sync-3e1457d4"


def _recorded_run(tmp_path: Path, run: str) -> Path:
    """A recall A/B the H100 recorded (vLLM 0.26.0), its records copied to render again."""
    out = tmp_path / run
    out.mkdir()
    for name in ("summary.json", "paired_items.jsonl"):
        (out / name).write_bytes((SESSION30 / run / name).read_bytes())
    return out


def _with_async(summary: RunRecord, baseline, candidate) -> RunRecord:
    arms = dict(summary.arms)
    for role, value in (("baseline", baseline), ("candidate", candidate)):
        config = dict(arms[role].effective_engine_config or {})
        if value is None:
            config.pop("scheduler.async_scheduling", None)
        else:
            config["scheduler.async_scheduling"] = value
        arms[role] = arms[role].model_copy(update={"effective_engine_config": config})
    return summary.model_copy(update={"arms": arms})


def test_the_async_note_says_which_mechanisms_the_flips_can_come_from():
    summary = RunRecord.model_validate(read_summary(SESSION30 / ASYNC_OFF))
    # as the H100 recorded the two runs: off in both arms, then on in both
    assert one_sided_section(summary).async_note.startswith(
        "Async scheduling was off in both arms (as vLLM resolved them): no flip here is "
        "the async-scheduling race")
    on = RunRecord.model_validate(read_summary(SESSION30 / ASYNC_ON))
    assert one_sided_section(on).async_note.startswith("Async scheduling was on in both arms")
    for base, cand, where in ((False, True, "the candidate"), (True, False, "the baseline")):
        note = one_sided_section(_with_async(summary, base, cand)).async_note
        assert note.startswith(f"Async scheduling was on in {where}: ")
        assert "async_scheduling: false tells the two apart" in note
    # an arm that did not record it (another vLLM, a server arm): no note, not a guess
    assert one_sided_section(_with_async(summary, False, None)).async_note == ""


def test_the_recorded_recall_runs_render_the_one_sided_flips_and_the_async_note(tmp_path):
    from evals.report import write_reports

    for run, note in ((ASYNC_OFF, "off in both arms"), (ASYNC_ON, "on in both arms")):
        out = _recorded_run(tmp_path, run)
        write_reports(out)
        markdown = (out / "summary.md").read_text(encoding="utf-8")
        html = (out / "report.html").read_text(encoding="utf-8")
        assert f"Async scheduling was {note}" in markdown
        assert f"<strong>Async scheduling was {note}" in html
    # the cold race: 4 forward flips and none back with async scheduling off, 6 with it on
    assert ("| recall\\_cold\\_race\\_b128 | 28 | 4 | 0 | 0 | 4: 0 text added, 4 rewritten | - | "
            "one-sided: 4 more forward than reverse flips |") in (
        tmp_path / ASYNC_OFF / "summary.md").read_text(encoding="utf-8")
    assert ("| recall\\_cold\\_race\\_b128 | 28 | 6 | 0 | 0 | 7: 0 text added, 7 rewritten | - | "
            "one-sided: 6 more forward than reverse flips |") in (
        tmp_path / ASYNC_ON / "summary.md").read_text(encoding="utf-8")


def test_uncached_doc_ids_are_the_waves_with_no_cache_hit_or_unknown():
    def wave(doc_ids, hits):
        return {"wave": 1, "items": len(doc_ids), "doc_ids": doc_ids,
                "exercise": {"vllm:prefix_cache_hits": hits}}

    assert uncached_doc_ids([wave([0, 1], 0.0), wave([2, 3], 128.0), wave([4], 0)]) == {0, 1, 4}
    assert uncached_doc_ids([wave([0], 5.0)]) == set()
    assert uncached_doc_ids(None) is None and uncached_doc_ids([]) is None
    # an older record (no doc ids) or no counter: unknown, never "none uncached"
    assert uncached_doc_ids([wave([0], 0.0), {"wave": 2, "items": 1, "exercise": {
        "vllm:prefix_cache_hits": 0.0}}]) is None
    assert uncached_doc_ids([{"wave": 1, "items": 1, "doc_ids": [0], "exercise": {}}]) is None


def _gzipped_items(tmp_path: Path, run: Path) -> list[PairedItem]:
    """The paired items of a committed GPU run, stored gzipped (paired_items.jsonl.gz)."""
    import gzip

    out = tmp_path / "run"
    out.mkdir()
    (out / "paired_items.jsonl").write_bytes(gzip.decompress(
        (run / "paired_items.jsonl.gz").read_bytes()))
    return read_paired_item_records(out)


SESSION32 = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu-h100"
             / "session32" / "runs" / "gpu-study-recall-many-b128-49959c6f")
RECALL_DATA = Path(__file__).resolve().parents[2] / "tasks" / "recall" / "data"


def test_the_h100_study_separates_the_flips_no_cache_hit_can_explain(tmp_path):
    """Session 32's combination (prefix caching + MTP, async scheduling on): its records
    predate the waves' doc ids, so they are added as the runner groups them (group_waves
    over the task's data); 15 of the cold race's 75 forward flips fell in cold waves, which
    hit nothing, and 2 of the multi-turn task's 8 in its wave 1."""
    run = SESSION32 / "comparisons" / "prefix_caching=on+decoding=mtp"
    summary = RunRecord.model_validate(read_summary(run))
    items = _gzipped_items(tmp_path, run)
    arm = summary.arms["candidate"]
    tasks = dict(arm.tasks)
    for task, data in (("recall_cold_race_many_b128", "cold_race_many_b128"),
                       ("recall_multiturn_many_b128", "multiturn_many_b128")):
        docs = [json.loads(line) for line in
                (RECALL_DATA / f"{data}.jsonl").read_text(encoding="utf-8").splitlines()]
        groups = group_waves(docs, "wave")
        waves = tasks[task].waves
        assert [w["items"] for w in waves] == [len(g) for g in groups]
        tasks[task] = tasks[task].model_copy(update={"waves": [
            {**w, "doc_ids": g} for w, g in zip(waves, groups)]})
    arms = {**summary.arms, "candidate": arm.model_copy(update={"tasks": tasks})}
    section = one_sided_section(summary.model_copy(update={"arms": arms}), items)
    rows = {r.task: r for r in section.rows}
    assert rows["recall_cold_race_many_b128"].forward == 75
    assert rows["recall_cold_race_many_b128"].uncached == "15 of 75"
    assert rows["recall_multiturn_many_b128"].uncached == "2 of 8"
    # as recorded (no doc ids): unknown, not zero
    assert {r.uncached for r in one_sided_section(summary, items).rows} == {"-"}


SESSION33 = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu-h100"
             / "session33" / "runs")


@pytest.mark.parametrize("run, data, expected", [
    # the many-manual study with async scheduling off: every forward flip in a question wave
    ("gpu-study-recall-many-b128-sync-5bf32b54/comparisons/prefix_caching=on+decoding=mtp",
     {"recall_cold_race_many_b128": "cold_race_many_b128",
      "recall_multiturn_many_b128": "multiturn_many_b128"},
     {"recall_cold_race_many_b128": (59, "0 of 59"), "recall_multiturn_many_b128": (0, "0 of 0")}),
    # the 192-token A/B, async scheduling on: one flip of each task in its wave 1
    ("gpu-recall-b192-0e6e9523",
     {"recall_cold_race_b192": "cold_race_b192", "recall_multiturn_b192": "multiturn_b192"},
     {"recall_cold_race_b192": (5, "1 of 5"), "recall_multiturn_b192": (11, "1 of 11")}),
])
def test_the_h100_records_with_doc_ids_count_the_flips_in_waves_with_no_cache_hit(
        tmp_path, run, data, expected):
    """Session 33's runs recorded each wave's doc ids on the H100. The column counts, from
    those and vLLM's counters, what an independent join gives: the forward flips whose item
    (the task's data, by doc id) sits in a wave that hit no cached token (counters.md: each
    task's wave 1 and the many-manual cold race's cold waves, the odd ones)."""
    folder = SESSION33 / run
    summary = RunRecord.model_validate(read_summary(folder))
    items = _gzipped_items(tmp_path, folder)
    rows = {r.task: r for r in one_sided_section(summary, items).rows}
    for task, (forward, uncached) in expected.items():
        docs = [json.loads(line) for line in
                (RECALL_DATA / f"{data[task]}.jsonl").read_text(encoding="utf-8").splitlines()]
        flips = [i for i in items if i.task == task and i.baseline == 1 and i.candidate == 0]
        in_odd_waves = sum(docs[i.doc_id]["wave"] % 2 == 1 for i in flips)
        assert (rows[task].forward, rows[task].uncached) == (forward, uncached)
        assert uncached == f"{in_odd_waves} of {len(flips)}"
