package e2e

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/elect"
)

// TestPartitions runs the scripts of testdata/partitions once per store:
// replicas run with --partitions, their children (lrchild -ledger) note
// every start and exit in a ledger, and take a flock per partition that
// the kernel refuses while an earlier child of the partition, or one of
// its descendants, is alive.
func TestPartitions(t *testing.T) { runPerStore(t, "../testdata/partitions") }

// ledgerEntry is one line of a ledger that lrchild -ledger appends to.
type ledgerEntry struct {
	event     string // start or exit
	partition int
	token     int64
	holder    string
	pid       int
}

func readLedger(ts *testscript.TestScript, file string) []ledgerEntry {
	data, err := os.ReadFile(ts.MkAbs(file))
	if os.IsNotExist(err) {
		return nil
	}
	ts.Check(err)
	var out []ledgerEntry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		e := ledgerEntry{event: f[0]}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "p":
				e.partition, err = strconv.Atoi(v)
			case "token":
				e.token, err = strconv.ParseInt(v, 10, 64)
			case "holder":
				e.holder = v
			case "pid":
				e.pid, err = strconv.Atoi(v)
			}
			if err != nil {
				ts.Fatalf("%s: bad line %q: %v", file, line, err)
			}
		}
		out = append(out, e)
	}
	return out
}

// running LEDGER N [-max K | -target GROUP M1,M2,…] [HOLDER...]: wait
// until each of the partitions 0 … N−1 runs, as the ledger tells: its last
// entry is a start, by a holder not listed and whose child is alive; with
// -max, until no holder runs more than K besides; with -target, until each
// runs on the member that GROUP's target (elect.Target) with members M1,
// M2, … gives it. Fails at once if a partition's tokens
// do not increase from start to start. Prints, for each holder, how many
// partitions it runs ("HOLDER COUNT" lines, by holder).
func cmdRunning(ts *testscript.TestScript, neg bool, args []string) {
	usage := "usage: running LEDGER N [-max K | -target GROUP M1,M2,…] [HOLDER...]"
	if neg || len(args) < 2 {
		ts.Fatalf("%s", usage)
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	excluded, most := args[2:], n
	var want []string // -target's layout
	switch {
	case len(excluded) >= 2 && excluded[0] == "-max":
		most, err = strconv.Atoi(excluded[1])
		ts.Check(err)
		excluded = excluded[2:]
	case len(excluded) >= 3 && excluded[0] == "-target":
		want = elect.Target(excluded[1], n, strings.Split(excluded[2], ","))
		excluded = excluded[3:]
	case len(excluded) > 0 && strings.HasPrefix(excluded[0], "-"):
		ts.Fatalf("%s", usage)
	}
	var counts map[string]int
	waitFor(ts, fmt.Sprintf("%d partitions running in %s", n, args[0]), func() bool {
		last := map[int]ledgerEntry{}
		tokens := map[int]int64{}
		for _, e := range readLedger(ts, args[0]) {
			if e.partition < 0 || e.partition >= n {
				ts.Fatalf("ledger: partition %d out of 0…%d", e.partition, n-1)
			}
			if e.event == "start" {
				if e.token <= tokens[e.partition] {
					ts.Fatalf("ledger: partition %d started with token %d after token %d", e.partition, e.token, tokens[e.partition])
				}
				tokens[e.partition] = e.token
			}
			last[e.partition] = e
		}
		counts = map[string]int{}
		for p := range n {
			e, ok := last[p]
			if !ok || e.event != "start" || slices.Contains(excluded, e.holder) || !processAlive(e.pid) {
				return false
			}
			counts[e.holder]++
		}
		for p, m := range want {
			// A layout on the way to the target may meet any -max.
			if last[p].holder != m {
				return false
			}
		}
		return slices.Max(slices.Collect(maps.Values(counts))) <= most
	})
	for _, h := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(ts.Stdout(), "%s %d\n", h, counts[h])
	}
}
