package chaos

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The checker's per-partition verdicts, fed made-up logs of partitioned
// runs: what must be flagged in one partition is flagged, and what is
// normal across partitions — their children running at once, with equal
// or decreasing tokens — is not.

// pstart is a partitioned child's start event (of 4 partitions).
func pstart(at int64, pid int, part int, token int64, excl int, holders string) string {
	return fmt.Sprintf("start at=%d pid=%d token=%d part=%d ppid=1 stime=1 holder=r0g1 excl=%d lockholders=%s partitions=4",
		at, pid, token, part, excl, holders)
}

// pev is a partitioned process's event.
func pev(kind string, at int64, pid int, part int, token int64, kv string) string {
	return strings.TrimSpace(fmt.Sprintf("%s at=%d pid=%d token=%d part=%d %s", kind, at, pid, token, part, kv))
}

// checkParted checks a partitioned run of 4 partitions that ended at end
// (0: no gap at the end is checked).
func checkParted(evs []event, rounds []*round, dbw []dbWrite, end int64) *result {
	return check(input{events: evs, rounds: rounds, writes: dbw, fenced: dbw != nil,
		timing: partTiming, bound: time.Second, partitions: 4, end: end})
}

var partTiming = timing{ttl: 3 * time.Second, grace: time.Second, deadline: time.Second, interval: 250 * time.Millisecond, reconcile: time.Second}

// fourRunning is one child per partition, all started at 10s, the tokens
// of partitions 1 … 3 equal to or lower than partition 0's.
func fourRunning() []string {
	return []string{
		pstart(10*sec, 100, 0, 50, 1, ""),
		pstart(10*sec+1e6, 101, 1, 50, 1, ""),
		pstart(10*sec+2e6, 102, 2, 40, 1, ""),
		pstart(10*sec+3e6, 103, 3, 7, 1, ""),
	}
}

// beats has every child of fourRunning beat every half second from 10.5s
// to until.
func beats(until int64) []string {
	var out []string
	for at := 10*sec + sec/2; at <= until; at += sec / 2 {
		for p, pid := range []int{100, 101, 102, 103} {
			tok := []int64{50, 50, 40, 7}[p]
			out = append(out, pev("beat", at, pid, p, tok, "role=child"))
		}
	}
	return out
}

func TestCheckPartitionsRunningAtOnceAreNotFlagged(t *testing.T) {
	evs := events(t, append(fourRunning(), beats(20*sec)...)...)
	res := checkParted(evs, nil, nil, 20*sec)
	if len(res.violations) != 0 || len(res.overlaps) != 0 {
		t.Errorf("violations %q, overlaps %+v; want none: children of different partitions may run at once, whatever their tokens", res.violations, res.overlaps)
	}
	if got, want := len(res.tenures), 4; got != want {
		t.Errorf("%d tenures, want %d", got, want)
	}
}

func TestCheckPartitionOverlapIsViolation(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []string
		// culprit is what the violation names.
		culprit string
	}{
		{"lock held", []string{
			pstart(12*sec, 200, 1, 60, 0, "101"),
			pev("overlap-end", 12*sec+5e8, 200, 1, 60, "waited=500000000"),
		}, "token 50's child"},
		{"logged after the next start", []string{
			pstart(12*sec, 200, 1, 60, 1, ""),
			pev("beat", 12*sec+1e8, 101, 1, 50, "role=child"),
		}, "token 50's child"},
		{"grandchild outlived its child", []string{
			pev("gstart", 11*sec, 301, 1, 50, "ppid=101 stime=1"),
			pev("stop", 11*sec+1e8, 101, 1, 50, "signal=terminated code=3"),
			pstart(12*sec, 200, 1, 60, 0, "301"),
			pev("beat", 12*sec+1e8, 301, 1, 50, "role=grandchild"),
		}, "token 50's grandchild"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Partition 1's child (token 50, pid 101) is hit; the others
			// run on and beat throughout.
			lines := append(fourRunning(), tc.evs...)
			evs := events(t, append(lines, beats(11*sec)...)...)
			var next event
			for _, e := range evs {
				if e.kind == "start" && e.part == "1" && e.token == 60 {
					next = e
				}
			}
			rd := faultRound(1, faultKill, variantPlain, 50, 11*sec+5e8, 0, next)
			rd.part = "1"
			res := checkParted(evs, []*round{rd}, nil, 0)
			if !hasViolation(res, "partition 1: overlap after round 1 (kill/plain): "+tc.culprit+" still ran when token 60's child started") {
				t.Errorf("violations %q; want partition 1's overlap", res.violations)
			}
			for _, v := range res.violations {
				if !strings.HasPrefix(v, "partition 1: ") {
					t.Errorf("violation %q is not partition 1's", v)
				}
			}
			if got, want := len(res.overlaps), 1; got != want {
				t.Errorf("%d overlaps, want %d: %+v", got, want, res.overlaps)
			}
		})
	}
}

// An overlap in one partition is not excused by a fault in another: a
// frozen replica's partition 0 may overlap (the design permits it), but
// partition 1's overlap, held by another replica and with no fault of its
// own, is a violation.
func TestCheckPartitionOverlapExcusedOnlyByItsOwnFault(t *testing.T) {
	evs := events(t,
		pstart(10*sec, 100, 0, 50, 1, ""),
		strings.Replace(pstart(10*sec, 101, 1, 50, 1, ""), "holder=r0g1", "holder=r1g1", 1),
		pstart(13*sec, 200, 0, 60, 0, "100"),
		pstart(13*sec, 201, 1, 60, 0, "101"),
		pev("stop", 14*sec+1e7, 100, 0, 50, "signal=terminated code=3"),
		pev("overlap-end", 14*sec+2e7, 200, 0, 60, "waited=1020000000"),
		pev("stop", 14*sec+1e7, 101, 1, 50, "signal=terminated code=3"),
		pev("overlap-end", 14*sec+2e7, 201, 1, 60, "waited=1020000000"),
	)
	rd := faultRound(1, faultStop, variantPlain, 50, 10*sec+1e8, 14*sec, evs[2])
	rd.part = "0"
	res := checkParted(evs, []*round{rd}, nil, 0)
	if !hasViolation(res, "partition 1: overlap after no fault: token 50's child") {
		t.Errorf("violations %q; want partition 1's overlap", res.violations)
	}
	if hasViolation(res, "partition 0:") {
		t.Errorf("violations %q; want none in partition 0 (frozen, stopped within the kill grace)", res.violations)
	}
	if got := len(res.overlaps); got != 2 || res.overlaps[0].class != "frozen" || res.overlaps[1].class != "" {
		t.Errorf("overlaps %+v; want partition 0's frozen, partition 1's a violation", res.overlaps)
	}
}

func TestCheckPartitionTokenOrder(t *testing.T) {
	evs := events(t,
		pstart(10*sec, 100, 0, 50, 1, ""),
		pev("stop", 11*sec, 100, 0, 50, ""),
		pstart(11*sec, 101, 1, 20, 1, ""),     // lower than partition 0's: fine
		pstart(11*sec+1e6, 200, 0, 50, 1, ""), // partition 0's token again: a violation
	)
	res := checkParted(evs, nil, nil, 0)
	if !hasViolation(res, "partition 0: token order: child 200 started with token 50 after child 100 with token 50") {
		t.Errorf("violations %q; want partition 0's token order", res.violations)
	}
	if hasViolation(res, "partition 1:") {
		t.Errorf("violations %q; want none in partition 1", res.violations)
	}
}

// One partition without a child for longer than the bound is flagged
// while the others run on.
func TestCheckPartitionGap(t *testing.T) {
	lines := fourRunning()
	lines = append(lines, beats(20*sec)...)
	lines = append(lines,
		pev("stop", 11*sec, 103, 3, 7, "signal=terminated code=3"),
		pstart(17*sec, 203, 3, 8, 1, ""), // 6s > TTL 3s + reconcile 1s + 1s
	)
	evs := events(t, lines...)
	// beats() has 103 beat until 20s; take partition 3's beats after its stop out.
	evs = dropBeats(evs, 103, 11*sec)
	res := checkParted(evs, nil, nil, 20*sec)
	if !hasViolation(res, "partition 3: no child for 6s") {
		t.Errorf("violations %q; want partition 3's gap", res.violations)
	}
	if len(res.violations) != 1 {
		t.Errorf("violations %q; want only partition 3's gap", res.violations)
	}

	// And a partition whose child is gone at the end.
	evs = dropBeats(events(t, append(fourRunning(), beats(20*sec)...)...), 102, 12*sec)
	res = checkParted(evs, nil, nil, 20*sec)
	if !hasViolation(res, "partition 2: no child for 8s (token 40's child last heard of, then the run ended)") {
		t.Errorf("violations %q; want partition 2's gap at the end", res.violations)
	}
}

func dropBeats(evs []event, pid int, after int64) []event {
	var out []event
	for _, e := range evs {
		if e.pid == pid && e.kind == "beat" && e.at > after {
			continue
		}
		out = append(out, e)
	}
	return out
}

// A write is stale by its own partition's tokens only.
func TestCheckPartitionStaleWrites(t *testing.T) {
	evs := events(t,
		pstart(10*sec, 100, 0, 50, 1, ""),
		pstart(10*sec, 101, 1, 30, 1, ""),
		pstart(13*sec, 200, 0, 60, 1, ""),
		pev("write", 13*sec+1e6, 100, 0, 50, "role=child result=ok took=1"), // stale: partition 0 is at 60
		pev("write", 13*sec+1e6, 101, 1, 30, "role=child result=ok took=1"), // fine: partition 1 is at 30
		pev("write", 13*sec+2e6, 200, 0, 60, "role=child result=ok took=1"),
	)
	dbw := []dbWrite{
		{id: 1, token: 60, part: "0", at: time.Unix(0, 13*sec+3e6)},
		{id: 2, token: 30, part: "1", at: time.Unix(0, 13*sec+4e6)}, // lower than id 1's, another partition: fine
		{id: 3, token: 50, part: "0", at: time.Unix(0, 13*sec+5e6)}, // stale
	}
	res := checkParted(evs, nil, dbw, 0)
	if got, want := res.staleAccepted[tkey{"0", 50}], 1; got != want {
		t.Errorf("partition 0 stale accepted = %d, want %d", got, want)
	}
	total := 0
	for _, n := range res.staleAccepted {
		total += n
	}
	if total != 1 {
		t.Errorf("stale accepted %v; want only partition 0's write of token 50", res.staleAccepted)
	}
	for _, want := range []string{"partition 0: stale write accepted", "partition 0: chaos_writes id 3: token 50 committed after token 60"} {
		if !hasViolation(res, want) {
			t.Errorf("violations %q; want %q", res.violations, want)
		}
	}
	if hasViolation(res, "partition 1:") || hasViolation(res, "id 2") {
		t.Errorf("violations %q; want none of partition 1", res.violations)
	}
}

// Events must name a partition of the run, and every partition must have
// had a child, with LEADERRUN_PARTITIONS right.
func TestCheckPartitionLabels(t *testing.T) {
	evs := events(t,
		pstart(10*sec, 100, 0, 50, 1, ""),
		pstart(10*sec, 101, 1, 50, 1, ""),
		strings.Replace(pstart(10*sec, 102, 2, 50, 1, ""), "partitions=4", "partitions=3", 1),
		pev("start", 10*sec, 104, 7, 50, "ppid=1 stime=1 holder=r0g1 excl=1 lockholders= partitions=4"),
		ev("beat", 11*sec, 105, 50, "role=child"),
	)
	res := checkParted(evs, nil, nil, 0)
	for _, want := range []string{
		"events or writes without a partition in a partitioned run",
		`events or writes of partition "7", not one of 0 … 3`,
		"partition 3 never had a child",
		`partition 2: child 102 started with LEADERRUN_PARTITIONS="3", want 4`,
	} {
		if !hasViolation(res, want) {
			t.Errorf("violations %q; want %q", res.violations, want)
		}
	}
	// And a run of one name has no partitions.
	res = checkOne(events(t, start(10*sec, 100, 1, 1, ""), pev("beat", 11*sec, 100, 0, 1, "role=child")), nil, nil, nil, testTiming, time.Second, nil)
	if !hasViolation(res, `events or writes of partition "0" in a run of one name`) {
		t.Errorf("violations %q; want the stray partition", res.violations)
	}
}

// A partition left without a child because its tenure's release failed
// is a violation on every store (on etcd it was known defect D3, fixed by
// 05925e4), while the replica that held it lives or after.
func TestCheckPartitionStuckByFailedReleaseIsAViolation(t *testing.T) {
	lines := append(fourRunning(), beats(20*sec)...)
	lines = append(lines, pev("stop", 11*sec, 103, 3, 7, "signal=terminated code=3"))
	evs := dropBeats(events(t, lines...), 103, 11*sec)
	done := make(chan struct{})
	close(done)
	holder := &replica{identity: "r0g1", done: done, exitAt: time.Unix(0, 21*sec)} // lived until after the end
	in := input{events: evs, timing: partTiming, bound: time.Second, partitions: 4, end: 20 * sec,
		unreleased: map[tkey]*replica{{"3", 7}: holder}, store: "etcd"}
	for _, store := range []string{"etcd", "postgres"} {
		in.store = store
		if res := check(in); !hasViolation(res, "partition 3: no child for 9s") {
			t.Errorf("%s: violations %q; want partition 3's gap", store, res.violations)
		}
	}
}

// A gap is excused (S1) only when the store failed a replica other than
// the one whose tenure ended: then the store itself was unavailable.
func TestCheckGapDuringStoreStallIsS1(t *testing.T) {
	lines := append(fourRunning(), beats(20*sec)...)
	lines = append(lines, pev("stop", 11*sec, 103, 3, 7, "signal=terminated code=3"), pstart(17*sec, 203, 3, 8, 1, ""))
	evs := dropBeats(events(t, lines...), 103, 11*sec)
	holder, other := &replica{identity: "r0g1"}, &replica{identity: "r1g2"}
	in := input{events: evs, timing: partTiming, bound: time.Second, partitions: 4, end: 20 * sec,
		replicas: []*replica{holder, other}, store: "postgres"}
	for _, tc := range []struct {
		name string
		errs []storeError
		want bool // S1, not a violation
	}{
		{"no store errors", nil, false},
		{"the holder's own", []storeError{{time.Unix(0, 12*sec), holder}}, false},
		{"another replica's, before the gap", []storeError{{time.Unix(0, 10*sec), other}}, false},
		{"another replica's, in the gap", []storeError{{time.Unix(0, 12*sec), other}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in.storeErrors = tc.errs
			res := check(in)
			if got := len(res.known["S1"]) == 1 && len(res.violations) == 0; got != tc.want {
				t.Errorf("violations %q, known %v; want S1 %v", res.violations, res.known, tc.want)
			}
		})
	}
}

// A partition the frozen replica acquired in the instant between the
// driver's listing of its partitions and the SIGSTOP has no round of its
// own; its overlap is still the frozen-supervisor case (seen on MySQL), and
// bounded as one: stopped within the kill grace of the thaw. So is one
// whose child read its start clock only after the SIGSTOP (its supervisor
// forked it just before the freeze; seen on Kubernetes, 14 ms after the
// partition the round names): a frozen supervisor forks nothing. A child
// of that replica that started after the thaw is no longer that case.
func TestCheckPartitionAcquiredJustBeforeFreezeIsFrozen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started int64 // partition 1's child's start; the SIGSTOP is at 10.1s
	}{
		{"acquired after the listing", 10*sec + 5e7},
		{"forked before the freeze, started after", 10*sec + 15e7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := frozenPairEvents(t, tc.started)
			rd := faultRound(1, faultStop, variantPlain, 50, 10*sec+1e8, 14*sec, evs[2])
			rd.part = "0"
			res := checkParted(evs, []*round{rd}, nil, 0)
			if hasViolation(res, "partition 0:") || hasViolation(res, "partition 1:") {
				t.Errorf("violations %q; want none in partitions 0 and 1 (their supervisor was frozen)", res.violations)
			}
			if got := len(res.overlaps); got != 2 || res.overlaps[0].class != "frozen" || res.overlaps[1].class != "frozen" {
				t.Errorf("overlaps %+v; want both frozen", res.overlaps)
			}
			// Still running 3s after the thaw: a violation, as for a listed one.
			late := slices.Clone(evs)
			late[6] = events(t, pev("stop", 17*sec+1e7, 101, 1, 51, "signal=terminated code=3"))[0]
			late[6].line = 7
			if res := checkParted(late, []*round{rd}, nil, 0); !hasViolation(res, "partition 1: round 1 (stop/plain): token 51's child ran") {
				t.Errorf("violations %q; want partition 1's late stop", res.violations)
			}
		})
	}
	t.Run("started after the thaw", func(t *testing.T) {
		evs := frozenPairEvents(t, 14*sec+5e6)
		rd := faultRound(1, faultStop, variantPlain, 50, 10*sec+1e8, 14*sec, evs[2])
		rd.part = "0"
		if res := checkParted(evs, []*round{rd}, nil, 0); !hasViolation(res, "partition 1: overlap after no fault") {
			t.Errorf("violations %q; want partition 1's overlap (its child started after the thaw)", res.violations)
		}
	})
}

// frozenPairEvents are the events of a replica holding partitions 0 and 1
// (partition 1's child started at started), both taken over at 13s and
// stopped at 14.01s.
func frozenPairEvents(t *testing.T, started int64) []event {
	t.Helper()
	return events(t,
		pstart(10*sec, 100, 0, 50, 1, ""),
		pstart(started, 101, 1, 51, 1, ""),
		pstart(13*sec, 200, 0, 60, 0, "100"),
		pstart(13*sec, 201, 1, 61, 0, "101"),
		pev("stop", 14*sec+1e7, 100, 0, 50, "signal=terminated code=3"),
		pev("overlap-end", 14*sec+2e7, 200, 0, 60, "waited=1020000000"),
		pev("stop", 14*sec+1e7, 101, 1, 51, "signal=terminated code=3"),
		pev("overlap-end", 14*sec+2e7, 201, 1, 61, "waited=1020000000"),
	)
}
