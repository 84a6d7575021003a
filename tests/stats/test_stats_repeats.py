"""Per-item pass rates over k repeats: the paired rate test against scipy's permutation and
t-tests, statsmodels' cluster-robust OLS and hand-counted sign flips; its false alarms on
simulated A/As; variance components against statsmodels' ANOVA; the items x repeats
planner against statsmodels' t-test power and by simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from evals.stats import (
    item_rates,
    items_repeats_for_power,
    paired_rate_test,
    variance_components,
)


def _outcomes(rng, rates, k):
    """(n, k) 0/1 outcomes, item i correct with probability rates[i]."""
    return (rng.random((np.size(rates), k)) < np.asarray(rates)[:, None]).astype(float)


def _pair(rng, n=10, k=4):
    rates = rng.beta(2, 2, n)
    return _outcomes(rng, rates, k), _outcomes(rng, rates, k)


def test_item_rates_average_the_repeats_present():
    rates = item_rates([[1, 0, 1, 1], [0, np.nan, 0, 1], [0.5, 1, np.nan, np.nan]])
    assert rates == pytest.approx([0.75, 1 / 3, 0.75])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_exact_sign_flips_match_scipy_permutation_test(seed):
    base, cand = _pair(np.random.default_rng(seed), n=11)  # k = 4: rates exact in binary
    d = cand.mean(axis=1) - base.mean(axis=1)
    result = paired_rate_test(base, cand, margin=0.1)
    assert result.exact and result.n_resamples == 2**11
    ni = sps.permutation_test((d + 0.1,), np.mean, permutation_type="samples",
                              alternative="greater")
    drop = sps.permutation_test((d,), np.mean, permutation_type="samples", alternative="less")
    assert result.pvalue == pytest.approx(ni.pvalue, abs=1e-12)
    assert result.pvalue_drop == pytest.approx(drop.pvalue, abs=1e-12)
    assert result.delta == pytest.approx(d.mean()) and result.statistic == pytest.approx(
        d.mean() + 0.1)


def test_monte_carlo_sign_flips_agree_with_scipy_within_resampling_error():
    rng = np.random.default_rng(7)
    rates = rng.beta(2, 2, 60)
    base, cand = _outcomes(rng, rates, 8), _outcomes(rng, np.clip(rates - 0.06, 0, 1), 8)
    d = cand.mean(axis=1) - base.mean(axis=1)
    result = paired_rate_test(base, cand, margin=0.05, n_resamples=20000, seed=3)
    assert not result.exact and result.n_resamples == 20000
    for ours, alternative, shift in ((result.pvalue, "greater", 0.05),
                                     (result.pvalue_drop, "less", 0.0)):
        ref = sps.permutation_test((d + shift,), np.mean, permutation_type="samples",
                                   alternative=alternative, n_resamples=20000,
                                   random_state=np.random.default_rng(11)).pvalue
        se = np.sqrt(max(ref, 1e-3) * (1 - ref) / 20000)
        assert abs(ours - ref) < 4 * np.sqrt(2) * se, (alternative, ours, ref)
    again = paired_rate_test(base, cand, margin=0.05, n_resamples=20000,
                             seed=np.random.default_rng(3))
    assert (again.pvalue, again.ci_low) == (result.pvalue, result.ci_low)  # seeded


def test_hand_counted_sign_flips_and_their_interval():
    """d = (0.5, -0.25, 0.75), margin 0.1: of the 8 sign vectors of d + 0.1 = (0.6, -0.15,
    0.85), the sums >= the observed 1.3 are 1.3 and 1.6, so p = 2/8; of the sums of s d
    only +-+ (1.5) exceeds the observed 1.0, so the drop p is 7/8. At alpha = 1/8 the
    interval is the second smallest and second largest of -inf, the subset means and
    +inf: (min d, max d)."""
    base = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    cand = np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    result = paired_rate_test(base, cand, margin=0.1, alpha=0.125)
    assert result.delta == pytest.approx(1 / 3)
    assert result.pvalue == pytest.approx(2 / 8)
    sums = [s1 * 0.5 - s2 * 0.25 + s3 * 0.75 for s1 in (1, -1) for s2 in (1, -1) for s3 in (1, -1)]
    assert result.pvalue_drop == pytest.approx(sum(s <= 1.0 for s in sums) / 8) == 7 / 8
    assert result.confidence_interval() == pytest.approx((-0.25, 0.75))
    assert result.confidence_level == 0.75


def test_the_interval_agrees_with_both_one_sided_tests():
    rng = np.random.default_rng(5)
    for exact_items in (12, 80):
        rates = rng.beta(2, 2, exact_items)
        base, cand = _outcomes(rng, rates, 4), _outcomes(rng, np.clip(rates - 0.04, 0, 1), 4)
        for margin in np.linspace(0.01, 0.3, 15):
            result = paired_rate_test(base, cand, margin=margin, n_resamples=4999, seed=1)
            assert (result.ci_low > -margin) == (result.pvalue <= result.alpha), margin
            assert (result.ci_high < 0) == (result.pvalue_drop <= result.alpha)


def test_t_method_is_the_one_sample_t_and_statsmodels_cluster_robust_ols():
    rng = np.random.default_rng(9)
    base, cand = _pair(rng, n=50, k=6)
    result = paired_rate_test(base, cand, margin=0.05, alpha=0.05, method="t")
    d = cand.mean(axis=1) - base.mean(axis=1)
    assert result.pvalue == pytest.approx(
        sps.ttest_1samp(d, -0.05, alternative="greater").pvalue, rel=1e-10)
    assert result.pvalue_drop == pytest.approx(
        sps.ttest_1samp(d, 0.0, alternative="less").pvalue, rel=1e-10)
    samples = (cand - base).ravel()  # sample-level differences, clustered by item
    fit = sm.OLS(samples, np.ones(samples.size)).fit(
        cov_type="cluster", cov_kwds={"groups": np.repeat(np.arange(50), 6)})
    assert result.delta == pytest.approx(fit.params[0], rel=1e-12)
    assert result.standard_error == pytest.approx(fit.bse[0], rel=1e-10)
    half = sps.t.isf(0.05, 49) * fit.bse[0]
    assert result.confidence_interval() == pytest.approx((d.mean() - half, d.mean() + half))
    assert result.mde == pytest.approx((sps.t.isf(0.05, 49) + sps.t.isf(0.2, 49)) * fit.bse[0])


def test_missing_samples_and_identical_arms():
    base = np.array([[1, 0, np.nan], [1, 1, 1], [0, 0, 1]])
    cand = np.array([[1, 1, 1], [1, np.nan, 0], [0, 0, 1]])
    result = paired_rate_test(base, cand, margin=0.1, method="t")
    assert result.missing == 2 and result.repeats == 3
    assert result.delta == pytest.approx(((1 - 0.5) + (0.5 - 1) + 0) / 3)
    for method in ("t", "sign_flip"):
        same = paired_rate_test(base, base, margin=0.1, method=method)
        assert same.degenerate and same.pvalue_drop == 1.0 and same.delta == 0.0
        assert np.isnan(same.mde)


@pytest.mark.parametrize("kwargs, message", [
    (dict(baseline=np.ones((5, 4)), candidate=np.ones((6, 4))), "5 items but candidate has 6"),
    (dict(baseline=np.ones((5, 4)), candidate=np.ones((5, 3))), "4 repeats per item but"),
    (dict(margin=0.0), "margin must be a positive"),
    (dict(margin=1.5), "margin must be a positive"),
    (dict(baseline=np.full((5, 4), 2.0)), r"2.0 at item 0, repeat 0"),
    (dict(baseline=np.ones(5)), "shape \\(items, repeats\\)"),
    (dict(baseline=np.vstack([np.ones((4, 4)), np.full((1, 4), np.nan)])),
     "no sample at all for item 4"),
    (dict(method="bootstrap"), "method must be one of"),
    (dict(alpha=0.6), r"alpha must be in \(0, 0.5\)"),
    (dict(seed=-1), "seed must be an integer >= 0 or a numpy.random.Generator"),
    (dict(baseline=np.ones((1, 4)), candidate=np.ones((1, 4))), "at least two items"),
])
def test_bad_input_is_one_clear_value_error(kwargs, message):
    args = dict(baseline=np.ones((5, 4)), candidate=np.zeros((5, 4)), margin=0.05) | kwargs
    with pytest.raises(ValueError, match=message):
        paired_rate_test(args.pop("baseline"), args.pop("candidate"), **args)


def _population(rng, n, drop=0.0, spread=0.0):
    """Item rates p ~ Beta(2, 2) and q = p - drop + noise (clipped): items differ in
    difficulty and, with `spread`, in how the candidate changes them."""
    p = rng.beta(2, 2, n)
    return p, np.clip(p - drop + rng.normal(0, spread, n) if spread else p - drop, 0, 1)


@pytest.mark.parametrize("method", ["sign_flip", "t"])
def test_false_alarms_on_simulated_aas_within_alpha_plus_2se(method):
    rng, sims, alpha = np.random.default_rng(21), 400, 0.05
    drops = noninferior = 0
    for _ in range(sims):
        p, _ = _population(rng, 60)
        aa = paired_rate_test(_outcomes(rng, p, 4), _outcomes(rng, p, 4), margin=0.05,
                              method=method, n_resamples=999, seed=rng)
        drops += aa.pvalue_drop <= alpha
        # at the null's boundary: the candidate is exactly `margin` worse on every item
        p = 0.1 + 0.9 * rng.beta(2, 2, 60)
        edge = paired_rate_test(_outcomes(rng, p, 4), _outcomes(rng, p - 0.1, 4), margin=0.1,
                                method=method, n_resamples=999, seed=rng)
        noninferior += edge.pvalue <= alpha
    limit = alpha + 2 * np.sqrt(alpha * (1 - alpha) / sims)
    print(f"\n{method}: A/A drop alarms {drops / sims:.3f}, non-inferiority claimed at "
          f"the boundary {noninferior / sims:.3f} ({sims} runs, limit {limit:.3f})")
    assert drops / sims <= limit and noninferior / sims <= limit
    assert drops / sims >= alpha - 3 * np.sqrt(alpha * (1 - alpha) / sims)  # not dead


def test_variance_components_are_statsmodels_one_way_anova():
    rng = np.random.default_rng(4)
    p, q = _population(rng, 40, drop=0.05, spread=0.15)
    base, cand = _outcomes(rng, p, 5), _outcomes(rng, q, 5)
    result = variance_components(base, cand)
    frame = pd.DataFrame({"d": (cand - base).ravel(), "item": np.repeat(np.arange(40), 5)})
    table = sm.stats.anova_lm(smf.ols("d ~ C(item)", data=frame).fit())
    msb, msw = table["mean_sq"].iloc[0], table["mean_sq"].iloc[1]
    assert result.within_item_var == pytest.approx(msw, rel=1e-10)
    assert result.between_item_var == pytest.approx((msb - msw) / 5, rel=1e-10)
    assert result.item_difference_var == pytest.approx(msb / 5, rel=1e-10)


def _true_components(p, q):
    """Var(q - p) between items, and E[p(1 - p) + q(1 - q)] within (independent arms)."""
    return float(np.var(q - p)), float(np.mean(p * (1 - p) + q * (1 - q)))


def test_variance_components_are_unbiased():
    rng = np.random.default_rng(8)
    p, q = _population(rng, 2_000_000, drop=0.05, spread=0.2)
    true_between, true_within = _true_components(p, q)
    estimates = []
    for _ in range(300):
        pick = rng.integers(0, p.size, 80)
        base, cand = _outcomes(rng, p[pick], 4), _outcomes(rng, q[pick], 4)
        for paired in (True, False):
            c = variance_components(base, cand, paired_repeats=paired)
            estimates.append((paired, c.between_item_var, c.within_item_var))
    for paired in (True, False):
        between, within = np.array([e[1:] for e in estimates if e[0] == paired]).T
        assert abs(between.mean() - true_between) < 3 * between.std() / np.sqrt(between.size)
        assert abs(within.mean() - true_within) < 3 * within.std() / np.sqrt(within.size)


def test_planner_matches_statsmodels_t_test_power():
    plans = items_repeats_for_power(between_item_var=0.01, within_item_var=0.4, drop=0.05,
                                    margin=0.03, alpha=0.05, power=0.8, available_items=300)
    assert [plan.repeats for plan in plans] == [1, 2, 4, 8, 16]
    solver = TTestPower()
    for plan in plans:
        sd = np.sqrt(0.01 + 0.4 / plan.repeats)
        for items, effect in ((plan.items_for_drop, 0.05), (plan.items_for_noninferiority, 0.03)):
            reference = solver.solve_power(effect_size=effect / sd, alpha=0.05, power=0.8,
                                           alternative="larger")
            assert items == int(np.ceil(reference))
        assert plan.items == plan.items_for_noninferiority  # the smaller effect decides
        assert plan.feasible == (plan.items <= 300)
    items = [plan.items for plan in plans]
    assert items == sorted(items, reverse=True)
    # repeats cut only the within-item part: 16 repeats need more than the between part alone
    floor = TTestPower().solve_power(effect_size=0.03 / 0.1, alpha=0.05, power=0.8,
                                     alternative="larger")
    assert items[-1] > floor


@pytest.mark.parametrize("repeats", [1, 4])
def test_planned_items_x_repeats_reach_the_power_by_simulation(repeats):
    """Plan from the population's true components, then simulate the planned study: the
    share of runs whose drop test rejects is within 2 SE of the 80% target."""
    rng = np.random.default_rng(30 + repeats)
    p, q = _population(rng, 1_000_000, drop=0.08, spread=0.1)
    between, within = _true_components(p, q)
    drop = float(np.mean(p - q))
    plan, = items_repeats_for_power(between_item_var=between, within_item_var=within,
                                    drop=drop, margin=0.05, repeats=(repeats,))
    sims, hits = 800, 0
    for _ in range(sims):
        pick = rng.integers(0, p.size, plan.items_for_drop)
        result = paired_rate_test(_outcomes(rng, p[pick], repeats),
                                  _outcomes(rng, q[pick], repeats), margin=0.05, method="t")
        hits += result.pvalue_drop <= 0.05
    se = np.sqrt(0.8 * 0.2 / sims)
    print(f"\nk={repeats}: {plan.items_for_drop} items, simulated power {hits / sims:.3f}")
    assert abs(hits / sims - 0.8) <= 2 * se


@pytest.mark.parametrize("kwargs, message", [
    (dict(between_item_var=-1.0), "between_item_var must be a finite variance"),
    (dict(within_item_var=float("nan")), "within_item_var must be a finite variance"),
    (dict(drop=0.0), "drop must be a positive"),
    (dict(margin=2.0), "margin must be a positive"),
    (dict(repeats=()), "repeats must be a non-empty list"),
    (dict(repeats=(4, 0)), "each entry of repeats must be an integer >= 1"),
    (dict(true_delta=-0.5), "true_delta must exceed -margin"),
])
def test_planner_bad_input(kwargs, message):
    args = dict(between_item_var=0.01, within_item_var=0.3, drop=0.05, margin=0.05) | kwargs
    with pytest.raises(ValueError, match=message):
        items_repeats_for_power(**args)


def test_variance_components_bad_input():
    with pytest.raises(ValueError, match="same repeats"):
        variance_components(np.ones((5, 4)), np.ones((5, 3)))
    with pytest.raises(ValueError, match="at least 2 items and 2 repeats"):
        variance_components(np.ones((5, 1)), np.ones((5, 1)))
    with_gap = np.ones((5, 4))
    with_gap[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"a missing sample \(NaN\) at item 1, repeat 2"):
        variance_components(with_gap, np.ones((5, 4)))
