"""Median and its 95% confidence interval from order statistics, shared by
the benchmark scripts (p2p-jobs.py, accel-bench.py, start-cost.py)."""
import math


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def median_ci(xs):
    """95% CI of the median from order statistics (binomial, normal approx.)."""
    s = sorted(xs)
    n = len(s)
    if n < 6:
        return s[0], s[-1]
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return s[lo], s[hi]
