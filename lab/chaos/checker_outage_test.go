package chaos

import (
	"testing"
	"time"
)

// After an outage (etcd without a leader, a tagged store's server
// restarted) the bound for a new child counts from the heal, plus the
// store's lease extension, and the gap while the store was down is no
// violation; a child later than that bound is one.
func TestCheckOutageCountsFromTheHeal(t *testing.T) {
	const kind = "test-outage"
	outages[kind] = outage{healed: "the test store served again"}
	defer delete(outages, kind)
	// The fault at 10s; the child stops at the renew deadline; the store
	// serves again at 16s.
	at, healAt := 10*sec, 16*sec
	for _, tc := range []struct {
		name   string
		kind   string
		nextAt int64
		want   string // a violation's text; "" for none
	}{
		{"within TTL + bound of the heal", kind, 19 * sec, ""},
		{"past TTL + bound of the heal", kind, 21 * sec, "new child 5s after the test store served again, more than TTL 3s"},
		{"the same child after a fault that is no outage", faultBlackhole, 19 * sec, "new child 9s after the fault"},
		{"etcd's lease extension", faultStoreLeader, healAt + 4*sec + 5e8, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := events(t,
				start(5*sec, 100, 1, 1, ""),
				ev("stop", 11*sec, 100, 1, "signal=terminated code=3"),
				start(tc.nextAt, 200, 2, 1, ""),
			)
			rd := faultRound(1, tc.kind, variantPlain, 1, at, healAt, evs[2])
			res := checkOne(evs, []*round{rd}, nil, nil, testTiming, time.Second, nil)
			switch {
			case tc.want == "" && len(res.violations) > 0:
				t.Errorf("violations %q; want none", res.violations)
			case tc.want != "" && !hasViolation(res, tc.want):
				t.Errorf("violations %q; want one with %q", res.violations, tc.want)
			}
		})
	}
}
