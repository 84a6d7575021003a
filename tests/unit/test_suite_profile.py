"""benchmarks/suite_profile.py: the engine lock's holds, read from the kernel's /proc/locks."""

import fcntl
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("suite_profile",
                                               REPO / "benchmarks" / "suite_profile.py")
suite_profile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite_profile)

PROC_LOCKS = """\
1: FLOCK  ADVISORY  WRITE 2149 00:2f:1183 0 EOF
1: -> FLOCK  ADVISORY  WRITE 2201 00:2f:1183 0 EOF
2: POSIX  ADVISORY  READ 880 fd:01:77 128 128
3: OFDLCK ADVISORY  WRITE -1 00:05:4242 0 EOF
"""


def test_the_default_lock_is_the_one_the_tests_set():
    spec = importlib.util.spec_from_file_location("tests_conftest", REPO / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    assert suite_profile.LOCK == conftest.ENGINE_LOCK


def test_locked_inodes_reads_holders_and_waiters():
    assert suite_profile.locked_inodes(PROC_LOCKS) == {1183, 77, 4242}
    assert suite_profile.locked_inodes("") == set()


def test_cpu_times_from_proc_stat():
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat = "cpu  100 20 30 800 40 5 5 0 7 0\ncpu0 50 10 15 400 20 2 3 0 3 0\n"
    assert suite_profile.cpu_times(stat) == (100 + 20 + 30 + 5 + 5, 1000)


def test_summarize_counts_holds_and_free_stretches():
    # one sample a second: held at 5-10 s, 14-20 s and 22-30 s; free from 11 s to the hold
    # at 14 s (3 s: a gap), from 21 s to 22 s (1 s: too short), from 31 s to the end at 34 s
    samples = [(t, 4 < t <= 10 or 13 < t <= 20 or 21 < t <= 30) for t in range(35)]
    result = suite_profile.summarize(samples)
    assert result["first_hold_at"] == 5
    assert result["held_seconds"] == 6 + 7 + 9
    assert result["free_gaps"] == [{"at": 11, "seconds": 3}, {"at": 31, "seconds": 3}]
    assert result["wall_seconds"] == 34
    assert suite_profile.summarize([(0.0, False), (1.0, False)])["first_hold_at"] is None


def test_a_real_flock_is_seen_while_held_and_not_after(tmp_path):
    lock = tmp_path / "engine.lock"
    assert not suite_profile.is_held(lock)  # no file yet
    with open(lock, "w") as f:
        assert not suite_profile.is_held(lock)
        fcntl.flock(f, fcntl.LOCK_EX)
        assert suite_profile.is_held(lock)
        fcntl.flock(f, fcntl.LOCK_UN)
        assert not suite_profile.is_held(lock)


def test_main_profiles_a_command_that_holds_the_lock(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "engine.lock"
    monkeypatch.setenv("EVALS_ENGINE_LOCK", str(lock))
    holder = ("import fcntl, sys, time; f = open(sys.argv[1], 'w'); time.sleep(0.6); "
              "fcntl.flock(f, fcntl.LOCK_EX); time.sleep(1.5)")
    out = tmp_path / "profile.json"
    code = suite_profile.main([str(out), "--", sys.executable, "-c", holder, str(lock)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["schema"] == "suite_profile/1" and result["exit_code"] == 0
    assert result["first_hold_at"] is not None and result["held_seconds"] > 0
    assert result["first_hold_at"] < result["wall_seconds"]
    assert 0 < result["cores_busy_share"] <= 1  # python itself ran
    assert "engine lock held" in capsys.readouterr().out
    assert suite_profile.main([str(out), "--", sys.executable, "-c", "pass"]) == 0
    assert json.loads(out.read_text())["first_hold_at"] is None
    assert "was never held" in capsys.readouterr().out


def test_a_command_after_two_dashes_is_required(capsys):
    assert suite_profile.main(["out.json"]) == 2
    assert suite_profile.main(["out.json", "nox", "-s", "tests"]) == 2
    assert "suite_profile.py OUT.json -- nox -s tests" in capsys.readouterr().err
