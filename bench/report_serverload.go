package main

import (
	"fmt"
	"strings"
)

// serverLoadSection renders the "serverload" section: each store's load
// for one leader and two followers as its server counted it, next to the
// store-cost section's figure for the same group size.
func (r *report) serverLoadSection(w *mdw) {
	if len(r.ServerLoad) == 0 {
		return
	}
	w.p("### Store load counted at the server")
	w.p("")
	w.p("One leader and two followers of leaderrun per store, default timings, the child `sleep`; the window opens")
	w.p("%v after the second follower stands by. The stores ran at the same time, each on a server (or, for", serverSettle)
	w.p("PostgreSQL, a database) that nothing else used, so the server's own counters are this group's. Target (§8): ≤ 1 per second.")
	w.p("")
	w.p("| store | window | counted at the server, per second | target | store-cost figure above (1 + 2) | how the server counted | by counter (window total, per second) |")
	w.p("|---|---|---|---|---|---|---|")
	for _, s := range r.ServerLoad {
		if s == nil {
			continue
		}
		above := "–"
		if c := r.costOf("leaderrun · "+s.Store, 2); c != nil && c.Err == "" {
			above = fmt.Sprintf("%.2f %s", c.PerSecond(), c.Unit)
		}
		if s.Err != "" {
			w.p("| leaderrun · %s | – | error: %s | | %s | %s | |", s.Store, mdEscape(s.Err), above, s.How)
			continue
		}
		w.p("| leaderrun · %s | %.0f s | %.2f %s (%d) | ≤ 1: %s | %s | %s | %s |", s.Store, s.Window.Seconds(), s.PerSecond(), s.Unit, s.Count,
			met(s.PerSecond() <= 1), above, s.How, strings.Join(sortedCounts(s.By, s.Window), ", "))
	}
	w.p("")
	for _, s := range r.ServerLoad {
		if s == nil || s.Err != "" {
			continue
		}
		if len(s.Stmts) > 0 {
			w.p("- %s, the statements the server logged over the window, by replica (connection's client port) and kind: %s.",
				s.Store, strings.Join(sortedCounts(s.Stmts, 0), ", "))
		}
		if len(s.Extra) > 0 {
			w.p("- %s, other counters over the window: %s.", s.Store, strings.Join(sortedCounts(s.Extra, s.Window), ", "))
		}
		if s.Note != "" {
			w.p("- %s: %s.", s.Store, s.Note)
		}
	}
	w.p("")
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
