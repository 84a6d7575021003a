"""The study record (evals.record.study_record.StudyRecord): study.json reads into the model
through its one reader, writes back as it was, and a field of the wrong shape is refused."""

from __future__ import annotations

import json

import pytest
from synthetic_runs import study_record

from evals.errors import UserError
from evals.schemas import STUDY
from evals.record.study_record import StudyRecord, read_study_record
from evals.report.ci_outputs import study_line
from evals.report.study import write_study_page


def test_study_json_reads_into_the_model_and_writes_back_as_it_was(tmp_path):
    path = tmp_path / "study.json"
    STUDY.write(path, study_record())
    record = read_study_record(path)
    assert isinstance(record, StudyRecord) and record.schema_version == STUDY.version
    assert record.comparisons[0].tasks[0].delta == -0.1 and record.comparisons[1].dir is None
    assert json.dumps(record.model_dump(), sort_keys=True) == \
        json.dumps(json.loads(path.read_text(encoding="utf-8")), sort_keys=True)
    assert study_line(record) == "REGRESSION exit=1 s-1: regression in " \
                                 "prefix_caching=on+decoding=mtp"
    assert write_study_page(record, tmp_path / "study.html").exists()


@pytest.mark.parametrize("damage, field", [
    (lambda raw: raw["gate"].update(margin="wide"), "gate.margin"),
    (lambda raw: raw["comparisons"][0].update(verdict="MAYBE"), "comparisons.0.verdict"),
    (lambda raw: raw.update(surprise=1), "surprise"),
])
def test_a_study_field_of_the_wrong_shape_is_refused(tmp_path, damage, field):
    raw = study_record()
    damage(raw)
    path = tmp_path / "study.json"
    STUDY.write(path, raw)
    with pytest.raises(UserError, match=f"{path}: a field has an unexpected shape \\(`{field}`"):
        read_study_record(path)
