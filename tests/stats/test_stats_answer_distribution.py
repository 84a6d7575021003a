"""The pooled answer-distribution test: its statistic against scipy's chi-square of
homogeneity, its p-value against scipy's exact paired permutation test, its false alarms on
simulated A/As, and its power where the rate test sees nothing (answers moved between wrong
labels; a temperature change that leaves the mean accuracy where it was)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from evals.stats import answer_distribution_test, paired_rate_test

LABELS = np.array(list("ABCD"))  # "A" is the correct answer throughout


def _draw(rng, probabilities, k):
    """(n, k) answers, item i's drawn from the row probabilities[i] over LABELS."""
    cumulative = np.cumsum(probabilities, axis=1)
    u = rng.random((probabilities.shape[0], k, 1))
    return LABELS[np.minimum((u > cumulative[:, None, :]).sum(axis=2), 3)]


def _correct(answers):
    return (answers == "A").astype(float)


def _chi_square_sum(base, cand):
    """Sum over items of scipy's Pearson chi-square of the item's 2 x C table."""
    total = 0.0
    for b, c in zip(base, cand):
        labels = sorted(set(b) | set(c))
        if len(labels) > 1:
            table = [[list(b).count(a) for a in labels], [list(c).count(a) for a in labels]]
            total += sps.chi2_contingency(table, correction=False).statistic
    return total


def test_statistic_is_the_sum_of_scipy_chi_square_statistics():
    rng = np.random.default_rng(1)
    probabilities = rng.dirichlet(np.ones(4), 30)
    base, cand = _draw(rng, probabilities, 6), _draw(rng, probabilities, 6)
    base[0] = cand[0] = "B"  # an item with one answer adds 0
    result = answer_distribution_test(base.tolist(), cand.tolist(), n_resamples=9)
    assert result.statistic == pytest.approx(_chi_square_sum(base, cand), rel=1e-12)
    assert (result.n_items, result.repeats) == (30, 6)


def test_pvalue_matches_scipy_exact_paired_permutation_test():
    """Repeat pairing swaps the arms of each (item, repeat) pair: scipy's 'samples'
    permutation of (baseline, candidate) pairs, enumerated exactly over 2^8 swaps."""
    base = np.array([list("AABC"), list("ABDA")])
    cand = np.array([list("CCCB"), list("BDAA")])

    def statistic(x, y):
        return _chi_square_sum(x.reshape(2, 4), y.reshape(2, 4))

    exact = sps.permutation_test((base.ravel(), cand.ravel()), statistic, vectorized=False,
                                 permutation_type="samples", alternative="greater").pvalue
    ours = answer_distribution_test(base.tolist(), cand.tolist(), n_resamples=20000, seed=2)
    assert abs(ours.pvalue - exact) < 4 * np.sqrt(exact * (1 - exact) / 20000), (ours, exact)
    assert ours.informative_items == 2


def _aa(rng, n, k, coupled):
    probabilities = rng.dirichlet(np.full(4, 0.7), n)  # items differ, some near one answer
    base = _draw(rng, probabilities, k)
    cand = _draw(rng, probabilities, k)
    if coupled:  # paired seeds: most samples reproduce, engine noise redraws some
        keep = rng.random(base.shape) < 0.8
        cand = np.where(keep, base, cand)
    return base.tolist(), cand.tolist()


@pytest.mark.parametrize("pairing, coupled", [("repeat", False), ("repeat", True),
                                              ("pooled", False)])
def test_false_alarms_on_simulated_aas_within_alpha_plus_2se(pairing, coupled):
    rng, sims, alpha = np.random.default_rng(11), 250, 0.05
    alarms = sum(answer_distribution_test(*_aa(rng, 40, 8, coupled), pairing=pairing,
                                          n_resamples=99, seed=rng).pvalue <= alpha
                 for _ in range(sims))
    limit = alpha + 2 * np.sqrt(alpha * (1 - alpha) / sims)
    print(f"\n{pairing} pairing, {'coupled' if coupled else 'independent'} A/A: "
          f"{alarms / sims:.3f} false alarms in {sims} (limit {limit:.3f})")
    assert alarms / sims <= limit


def test_identical_samples_are_no_evidence():
    answers = [list("ABCA"), list("DDDD")]
    result = answer_distribution_test(answers, answers)
    assert (result.statistic, result.pvalue, result.informative_items) == (0.0, 1.0, 0)
    assert result.top_items == () and not result.changed


def _detection(rng, base_probs, cand_probs, sims=60, k=8):
    """Share of runs that the distribution test flags, and that the rate test's drop test
    flags, for answers drawn from the two arms' per-item probabilities."""
    changed = dropped = 0
    for _ in range(sims):
        base, cand = _draw(rng, base_probs, k), _draw(rng, cand_probs, k)
        changed += answer_distribution_test(base.tolist(), cand.tolist(), n_resamples=199,
                                            seed=rng).changed
        dropped += paired_rate_test(_correct(base), _correct(cand), margin=0.05, method="t"
                                    ).pvalue_drop <= 0.05
    return changed / sims, dropped / sims


def test_answers_moved_between_wrong_labels_are_caught_where_the_rate_test_is_blind():
    rng = np.random.default_rng(5)
    correct = rng.beta(3, 2, 80)[:, None]
    base = np.hstack([correct, (1 - correct) * np.array([[0.7, 0.2, 0.1]])])
    cand = np.hstack([correct, (1 - correct) * np.array([[0.2, 0.7, 0.1]])])
    changed, dropped = _detection(rng, base, cand)
    print(f"\nwrong answers moved: distribution test {changed:.2f}, rate test {dropped:.2f}")
    assert changed >= 0.9 and dropped <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 60)


def _softmax(logits, temperature):
    e = np.exp(logits / temperature)
    return e / e.sum(axis=1, keepdims=True)


def test_a_temperature_change_at_equal_mean_accuracy_is_caught():
    """A quarter of the items lean to the right answer (sharper at T = 0.5: more correct),
    the rest to a wrong one (sharper: less correct); the wrong lean is chosen so that the
    mean accuracy is exactly the same at T = 1 and T = 0.5. (A milder 1 -> 0.7 moves each
    item's distribution by half as much, total variation 0.11 instead of 0.24, and 80
    items x 8 repeats catch it in only ~15% of runs: small changes need more items.)"""
    easy = np.array([1.0, 0.0, 0.0, 0.0])

    def hard(lean):
        return np.array([0.0, lean, 0.0, 0.0])

    def accuracy_change(lean):
        logits = np.vstack([np.tile(easy, (25, 1)), np.tile(hard(lean), (75, 1))])
        return float((_softmax(logits, 0.5) - _softmax(logits, 1.0))[:, 0].sum())

    lean = optimize.brentq(accuracy_change, 0.05, 1.0)
    logits = np.vstack([np.tile(easy, (25, 1)), np.tile(hard(lean), (75, 1))])
    assert accuracy_change(lean) == pytest.approx(0.0, abs=1e-9)
    rng = np.random.default_rng(9)
    changed, dropped = _detection(rng, _softmax(logits, 1.0), _softmax(logits, 0.5))
    print(f"\ntemperature 1 -> 0.5 at equal accuracy: distribution test {changed:.2f}, "
          f"rate test {dropped:.2f}")
    assert changed >= 0.9 and dropped <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 60)


def test_top_items_name_the_changed_item():
    rng = np.random.default_rng(3)
    base, cand = _aa(rng, 30, 8, coupled=False)
    base[17], cand[17] = ["A"] * 8, ["C"] * 7 + ["A"]
    result = answer_distribution_test(base, cand, n_resamples=499)
    top = result.top_items[0]
    assert top.item == 17 and result.changed
    assert top.baseline_counts == (("A", 8),) and top.candidate_counts == (("C", 7), ("A", 1))
    assert top.statistic > top.null_mean


@pytest.mark.parametrize("args, kwargs, message", [
    (([["A"]] * 3, [["A"]] * 2), {}, "3 items but candidate_answers has 2"),
    (([["A", "B"]] * 2, [["A", "B"], ["A"]]), {}, r"candidate_answers\[1\] has 1 answers"),
    (("AB", ["A", "B"]), {}, "one list of answers per item"),
    (([["A"], "B"], [["A"], ["B"]]), {}, r"baseline_answers\[1\] must be the item's list"),
    (([[["A"]]], [["A"]]), {}, "unhashable answer"),
    (([], []), {}, "empty"),
    (([["A"]], [["A"]]), {"pairing": "shuffle"}, "pairing must be one of"),
    (([["A"]], [["A"]]), {"alpha": 1.5}, "alpha must be"),
    (([["A"]], [["A"]]), {"seed": 1.5}, "seed must be an integer"),
])
def test_bad_input_is_one_clear_value_error(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        answer_distribution_test(*args, **kwargs)
