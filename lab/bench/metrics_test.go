package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

const sample = `# HELP leaderrun_renew_duration_seconds Round-trip time of renew calls.
# TYPE leaderrun_renew_duration_seconds histogram
leaderrun_renew_duration_seconds_bucket{name="a b",le="0.025"} 90
leaderrun_renew_duration_seconds_bucket{name="a b",le="0.05"} 99
leaderrun_renew_duration_seconds_bucket{name="a b",le="+Inf"} 100
leaderrun_renew_duration_seconds_sum{name="a b"} 1.5
leaderrun_renew_duration_seconds_count{name="a b"} 100
leaderrun_store_calls_total{name="a \"q\"",op="renew",result="ok"} 7
`

func TestParseMetricsAndHistogram(t *testing.T) {
	ms, err := parseMetrics(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sumMetric(ms, "leaderrun_store_calls_total", map[string]string{"op": "renew"}), 7.0; got != want {
		t.Errorf("renew calls = %v, want %v", got, want)
	}
	if got, want := ms[len(ms)-1].labels["name"], `a "q"`; got != want {
		t.Errorf("escaped label = %q, want %q", got, want)
	}
	h := histogramOf(ms)("leaderrun_renew_duration_seconds")
	if got, want := h.quantileBound(0.5), 0.025; got != want {
		t.Errorf("p50 bound = %v, want %v", got, want)
	}
	if got, want := h.quantileBound(0.99), 0.05; got != want {
		t.Errorf("p99 bound = %v, want %v", got, want)
	}
	if got := h.quantileBound(1); !math.IsInf(got, 1) {
		t.Errorf("max bound = %v, want +Inf", got)
	}
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back histogram
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if got, want := back.quantileBound(1), h.quantileBound(1); got != want {
		t.Errorf("after a JSON round trip, max bound = %v, want %v", got, want)
	}
	if got, want := h.sub(h).N(), 0.0; got != want {
		t.Errorf("h − h has %v observations, want %v", got, want)
	}
}

func TestStatementKind(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT GET_LOCK('x', 13)":              "SELECT GET_LOCK",
		"  UPDATE `leaderrun_leases` SET a = 1": "UPDATE leaderrun_leases SET",
		"START TRANSACTION":                     "START TRANSACTION",
	} {
		if got := statementKind([]byte(q)); got != want {
			t.Errorf("statementKind(%q) = %q, want %q", q, got, want)
		}
	}
}
