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
	settle := serverSettle
	for _, s := range r.ServerLoad {
		if s != nil && s.Settle > 0 {
			settle = s.Settle
		}
	}
	w.p("### Store load counted at the server")
	w.p("")
	w.p("One leader and two followers of leaderrun per store, default timings, the child `sleep`; the window opens")
	w.p("%v after the second follower stands by. The stores ran at the same time, each on a server (or, for", settle)
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
	w.p("Machine CPU busy during this section: %s (other engineers' work shares the machine; the counts follow", r.busy("serverload"))
	w.p("the replicas' timers, not the machine's speed).")
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

// serverLoadRows adds the serverload section's figures to the store-cost
// table, one row per store, "counted at the server".
func (r *report) serverLoadRows(w *mdw) {
	for _, s := range r.ServerLoad {
		if s == nil {
			continue
		}
		label := "leaderrun · " + s.Store
		if s.Err != "" {
			w.p("| %s | 2 | – | error: %s | – | at the server | | |", label, mdEscape(s.Err))
			continue
		}
		how := map[string]string{
			"PostgreSQL": fmt.Sprintf("at the server: Δ xact_commit+xact_rollback, settled %.0f s", s.Settle.Seconds()),
			"MariaDB":    "at the server: Δ Questions + pings, a private mariadbd",
			"Redis":      "at the server: INFO commandstats, a private redis-server, scripts' inner commands left out",
			"etcd":       "at the server: gRPC calls handled + stream messages",
		}[s.Store]
		var by []string
		for i, k := range sortedKeys(s.By) {
			if i == 4 {
				break
			}
			by = append(by, fmt.Sprintf("%s %.2f", k, float64(s.By[k])/s.Window.Seconds()))
		}
		w.p("| %s | 2 | %.0f s | %.2f %s | – | %s | %s | ≤ 1: %s |", label, s.Window.Seconds(), s.PerSecond(), s.Unit, how,
			strings.Join(by, ", "), met(s.PerSecond() <= targetStmtPerSec))
	}
}

// serverLoadCell is the headline's cell for the system labelled l.
func (r *report) serverLoadCell(l string) string {
	for _, s := range r.ServerLoad {
		if s != nil && "leaderrun · "+s.Store == l {
			if s.Err != "" || s.Window == 0 {
				return "not measured"
			}
			return fmt.Sprintf("%.2f %s %s", s.PerSecond(), s.Unit, met(s.PerSecond() <= targetStmtPerSec))
		}
	}
	return "–"
}
