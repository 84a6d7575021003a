"""Pure statistics for paired accuracy-regression checks.

Arrays in, frozen result objects out; randomness only through an explicit
``numpy.random.Generator``; no I/O. ``baseline`` and ``candidate`` are per-item
scores aligned by index, delta = mean(candidate) - mean(baseline), and a regression
is delta < 0. Modules:

* :mod:`.binary` - flip counts and the exact McNemar test (with mid-p)
* :mod:`.tango` - Tango's score test of non-inferiority and score interval
* :mod:`.bootstrap` - paired (optionally cluster) percentile bootstrap
* :mod:`.standard_error` - cluster-robust standard error (Miller 2024)
* :mod:`.labels` - confusion matrices and marginal homogeneity of predicted labels
* :mod:`.lengths` - output length shifts, empty and truncated outputs
* :mod:`.multiple` - Holm and Benjamini-Hochberg adjustment across tasks
* :mod:`.power` - power, minimum detectable drop, items needed
* :mod:`.sequential` - anytime-valid early stopping
* :mod:`.control_chart` - EWMA and tabular CUSUM charts over a series of runs
* :mod:`.interaction` - interaction of two optimizations over the same items (2x2)
* :mod:`.load_curve` - latency percentiles per concurrency level, speed-up, crossover, SLO
* :mod:`.repeats` - per-item pass rates over k sampled repeats and their paired test
  (sign-flip permutation or cluster-robust t); :mod:`.repeats_power` plans items x repeats
* :mod:`.answer_distribution` - did the answer distribution per item change under sampling
* :mod:`.aa_resampling` - both tests' false alarms on A/As resampled from recorded samples
"""

from __future__ import annotations

import importlib

# Each public name and the module that defines it, imported when first asked for (PEP 562):
# a reader of finished runs that needs one test does not import every module and the parts
# of scipy they use (`from evals.stats import x` and `stats.x` work as before).
_EXPORTS = {
    "aa_resampling": ("AaResamplingResult", "aa_resampled_false_alarms"),
    "answer_distribution": ("DistributionTestResult", "ItemAnswerShift",
                            "answer_distribution_test"),
    "binary": ("FlipCounts", "McNemarResult", "flip_counts", "mcnemar_exact",
               "mcnemar_exact_from_counts"),
    "bootstrap": ("BootstrapResult", "paired_bootstrap"),
    "clustered": ("ClusteredPairedResult", "clustered_paired_test"),
    "pooled": ("PooledMcNemarResult", "pooled_mcnemar"),
    "control_chart": ("CusumChartResult", "EwmaChartResult", "cusum_chart", "ewma_chart"),
    "interaction": ("InteractionResult", "interaction_test"),
    "intervals": ("ConfidenceInterval",),
    "labels": ("MarginalHomogeneityResult", "PerClassAccuracy", "confusion_matrix",
               "marginal_homogeneity", "per_class_accuracy"),
    "lengths": ("LengthShiftResult", "OutputShareShift", "empty_output_shift",
                "paired_length_shift", "truncation_shift"),
    "multiple": ("MultipleTestingResult", "benjamini_hochberg", "holm"),
    "power": ("items_needed_for_drop", "items_needed_for_noninferiority", "mcnemar_power",
              "mde_paired", "noninferiority_power"),
    "repeats": ("RateTestResult", "RepeatsPlan", "VarianceComponents", "item_rates",
                "items_repeats_for_power", "paired_rate_test", "variance_components"),
    "sequential": ("SequentialLook", "SequentialResult", "sequential_decision"),
    "standard_error": ("ClusteredStandardError", "clustered_standard_error"),
    "tango": ("TangoResult", "tango_noninferiority", "tango_noninferiority_from_counts",
              "tango_score_interval", "tango_score_statistic"),
    "validation": ("as_binary", "as_paired_arrays", "as_paired_binary", "check_alternative",
                   "check_confidence_level"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

# the public names are the table's: one list to keep
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
