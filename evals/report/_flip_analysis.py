"""Where the two arms disagree, per task: the paired 2x2 table, label shift, output length.

The 2x2 table is rebuilt from the stored means and flip counts (binary means are
exact fractions of n). Classification tasks add both confusion matrices, their
difference, per-class accuracy and the marginal-homogeneity test of predicted
labels (Stuart-Maxwell; see `evals.stats.labels`).
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.record.run_record_model import RunRecord, TaskRecord
from evals.record.task_parts import LabelsRecord, LengthsRecord
from evals.report import _formatting as fmt


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    css: str


@dataclass(frozen=True, slots=True)
class MatrixRow:
    category: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class Matrix:
    """Rows are targets, columns predictions."""

    title: str
    categories: tuple[str, ...]
    rows: tuple[MatrixRow, ...]


@dataclass(frozen=True, slots=True)
class ClassRow:
    category: str
    baseline_accuracy: str
    candidate_accuracy: str
    delta: str
    share_baseline: str
    share_candidate: str


@dataclass(frozen=True, slots=True)
class LabelShift:
    matrices: tuple[Matrix, ...]
    classes: tuple[ClassRow, ...]
    statistic: str
    df: str
    pvalue: str
    note: str | None


@dataclass(frozen=True, slots=True)
class LengthShift:
    mean_chars_baseline: str
    mean_chars_candidate: str
    pvalue: str
    empty_baseline: str
    empty_candidate: str
    note: str | None


@dataclass(frozen=True, slots=True)
class TwoByTwo:
    both_correct: str
    correct_to_wrong: str
    wrong_to_correct: str
    both_wrong: str


@dataclass(frozen=True, slots=True)
class TaskFlips:
    task: str
    binary: bool
    n: str
    table: TwoByTwo | None
    lower: str
    higher: str
    unchanged: str
    flip_rate: str
    regression_test: str
    labels: LabelShift | None
    lengths: LengthShift | None


def _two_by_two(t: TaskRecord) -> TwoByTwo | None:
    n, c2w, w2c, base = t.n, t.correct_to_wrong, t.wrong_to_correct, t.baseline_mean
    if not all(fmt.finite(v) for v in (n, c2w, w2c, base)):
        return None
    baseline_correct = round(base * n)
    return TwoByTwo(both_correct=fmt.count(baseline_correct - c2w),
                    correct_to_wrong=fmt.count(c2w), wrong_to_correct=fmt.count(w2c),
                    both_wrong=fmt.count(n - baseline_correct - w2c))


def _counts(matrix) -> tuple[tuple[Cell, ...], ...]:
    return tuple(tuple(Cell(fmt.count(v), "diag" if i == j else "") for j, v in enumerate(row))
                 for i, row in enumerate(matrix))


def _difference(base, cand) -> tuple[tuple[Cell, ...], ...]:
    rows = []
    for i, (rb, rc) in enumerate(zip(base, cand)):
        cells = []
        for j, (b, c) in enumerate(zip(rb, rc)):
            d = int(c) - int(b)
            # on the diagonal more is better; off it (mistakes) more is worse
            good = d > 0 if i == j else d < 0
            css = "" if d == 0 else ("better" if good else "worse")
            cells.append(Cell(f"{d:+d}" if d else "0", css))
        rows.append(tuple(cells))
    return tuple(rows)


def _label_shift(labels: LabelsRecord) -> LabelShift:
    cats = tuple(str(c) for c in labels.categories)
    base, cand = labels.confusion_baseline, labels.confusion_candidate
    def matrix(title, rows):
        return Matrix(title, cats, tuple(MatrixRow(c, r) for c, r in zip(cats, rows)))

    matrices = (matrix("baseline", _counts(base)), matrix("candidate", _counts(cand)),
                matrix("candidate \u2212 baseline", _difference(base, cand)))
    columns = [labels.per_class_baseline, labels.per_class_candidate,
               labels.predicted_share_baseline, labels.predicted_share_candidate]
    classes = []
    for i, cat in enumerate(cats):
        pb, pc, sb, sc = (col[i] if i < len(col) else None for col in columns)
        delta = pc - pb if fmt.finite(pb) and fmt.finite(pc) else None
        classes.append(ClassRow(cat, fmt.share(pb), fmt.share(pc), fmt.points(delta),
                                fmt.share(sb), fmt.share(sc)))
    stat = labels.homogeneity_statistic
    return LabelShift(matrices=matrices, classes=tuple(classes),
                      statistic=f"{stat:.3g}" if fmt.finite(stat) else fmt.MISSING,
                      df=fmt.MISSING if labels.homogeneity_df is None
                      else str(labels.homogeneity_df),
                      pvalue=fmt.pvalue(labels.homogeneity_pvalue),
                      note=labels.homogeneity_note)


def _length_shift(lengths: LengthsRecord) -> LengthShift:
    def chars(x):
        return f"{x:,.0f}" if fmt.finite(x) else fmt.MISSING

    return LengthShift(
        mean_chars_baseline=chars(lengths.mean_chars_baseline),
        mean_chars_candidate=chars(lengths.mean_chars_candidate),
        pvalue=fmt.pvalue(lengths.pvalue),
        empty_baseline=fmt.share(lengths.empty_share_baseline),
        empty_candidate=fmt.share(lengths.empty_share_candidate),
        note=lengths.note)


def task_flips(summary: RunRecord) -> tuple[TaskFlips, ...]:
    out = []
    for t in summary.tasks:
        binary = bool(t.binary)
        n, c2w, w2c = t.n, t.correct_to_wrong, t.wrong_to_correct
        unchanged = n - c2w - w2c if all(fmt.finite(v) for v in (n, c2w, w2c)) else None
        labels, lengths = t.labels, t.lengths
        out.append(TaskFlips(
            task=t.task, binary=binary, n=fmt.count(n),
            table=_two_by_two(t) if binary else None,
            lower=fmt.count(c2w), higher=fmt.count(w2c), unchanged=fmt.count(unchanged),
            flip_rate=fmt.share(t.flip_rate),
            regression_test=f"{t.regression_test or ''}: adjusted p = "
                            f"{fmt.pvalue(t.regression_pvalue_adjusted)}",
            labels=_label_shift(labels) if labels else None,
            lengths=_length_shift(lengths) if lengths else None))
    return tuple(out)
