package observe

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// TestDashboardQueriesExportedMetrics reads the Grafana dashboard shipped
// in packaging/grafana and checks that every metric its queries name is one
// leaderrun exports (in either mode), and that every label they group by is
// one of that metric's or Prometheus's own (instance, job, le).
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile("../packaging/grafana/leaderrun.json")
	if err != nil {
		t.Fatal(err)
	}
	var queries []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					queries = append(queries, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("leaderrun.json: %v", err)
	}
	walk(dash)
	if len(queries) < 10 {
		t.Fatalf("found %d queries in the dashboard, want one per panel at least", len(queries))
	}

	labels := exportedLabels(t)
	metricRE := regexp.MustCompile(`\bleaderrun_[a-z_]+`)
	byRE := regexp.MustCompile(`\bby \(([^)]*)\)`)
	for _, q := range queries {
		names := metricRE.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("query %q names no leaderrun metric", q)
		}
		for _, name := range names {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && labels[b] != nil {
					base = b
				}
			}
			ls := labels[base]
			if ls == nil {
				t.Errorf("query %q: leaderrun exports no metric %s", q, name)
				continue
			}
			for _, m := range byRE.FindAllStringSubmatch(q, -1) {
				for _, l := range strings.Split(m[1], ",") {
					l = strings.TrimSpace(l)
					if !ls[l] && l != "instance" && l != "job" && !(l == "le" && base != name) {
						t.Errorf("query %q groups by %q, which %s does not have", q, l, name)
					}
				}
			}
		}
	}
}

// exportedLabels returns every leaderrun_ metric an Observer of either mode
// exports, with its label names.
func exportedLabels(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	single, _ := newTest(t)
	parted, _ := newTest(t)
	parted.Partitioned(4, func() any { return nil })
	for _, o := range []*Observer{single, parted} {
		o.ChildExited(0) // a vector without samples is not gathered
		o.StoreCall("renew", time.Millisecond, nil)
	}
	parted.PartitionStarted(0, 1)
	parted.PartitionEnded(0, elect.ErrHandedOff)
	parted.PartitionStarted(1, 2)
	for _, o := range []*Observer{single, parted} {
		mfs, err := o.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "leaderrun_") {
				continue
			}
			ls := out[mf.GetName()]
			if ls == nil {
				ls = map[string]bool{}
				out[mf.GetName()] = ls
			}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					ls[lp.GetName()] = true
				}
			}
		}
	}
	return out
}
