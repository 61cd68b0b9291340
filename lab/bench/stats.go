package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// summary describes a sample of durations. Percentiles are nearest-rank:
// with n samples, p99 is the ⌈0.99·n⌉-th smallest, which is the maximum
// for n < 100.
type summary struct {
	N                       int
	Min, P50, P90, P99, Max time.Duration
}

func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return summary{N: len(s), Min: s[0], P50: rank(s, 0.50), P90: rank(s, 0.90), P99: rank(s, 0.99), Max: s[len(s)-1]}
}

func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ms formats a duration in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) < 10:
		return fmt.Sprintf("%.2f", v)
	case math.Abs(v) < 1000:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// ratio formats a/b, or "–" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	r := a / b
	switch {
	case r < 10:
		return fmt.Sprintf("%.2f×", r)
	default:
		return fmt.Sprintf("%.0f×", r)
	}
}

func dratio(a, b time.Duration) string { return ratio(float64(a), float64(b)) }

func ratios(ds []time.Duration, base time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(base)
	}
	return out
}

// fsummary is summary's twin for plain numbers.
type fsummary struct {
	N                       int
	Min, P50, P90, P99, Max float64
}

func fsummarize(xs []float64) fsummary {
	if len(xs) == 0 {
		return fsummary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return fsummary{N: len(s), Min: s[0], P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: s[len(s)-1]}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
