package main

import (
	"fmt"
	"strings"
	"time"
)

// initSection writes the "As an init" table: leaderrun beside tini and
// dumb-init, measured in this run.
func (r *report) initSection(w *mdw) {
	in := r.Init
	if in == nil {
		return
	}
	w.p("## As an init")
	w.p("")
	w.p("leaderrun as a container's ENTRYPOINT beside Debian's `tini` and `dumb-init`, measured side by side in")
	w.p("%d interleaved rounds: start-to-exit is spawn → exit of `INIT /bin/true` (leaderrun: `--once` on an SQLite", in.Runs)
	w.p("file that exists, the name free, `--log-level warn`); SIGTERM → exit is the signal to the init alone (as")
	w.p("`docker stop` sends it) while it runs `sleep 60`, 200 ms after sleep started, nobody else campaigning. Memory")
	w.p("is from `/proc/PID/smaps_rollup` after 3 s running `sleep 60`: USS is the process's private pages")
	w.p("(Private_Clean + Private_Dirty), what it alone costs; Pss charges shared pages pro rata. tini runs with `-s`")
	w.p("(a subreaper, as when it is not PID 1). Nothing here runs as PID 1 of the host.")
	if in.Note != "" {
		w.p("")
		w.p("Not measured: %s", strings.TrimSuffix(in.Note, "; "))
	}
	var tini time.Duration
	for _, s := range in.Systems {
		if s.Label == "tini" && len(s.Start) > 0 {
			tini = summarize(s.Start).P50
		}
	}
	w.p("")
	w.p("| init | start-to-exit p50 | p90 | × tini | SIGTERM → exit p50 | p90 | init's RSS | USS | Pss (anon + file) | namespace init: RSS / USS / Pss |")
	w.p("|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range in.Systems {
		if s.Err != "" {
			w.p("| %s | error: %s | | | | | | | | |", s.Label, s.Err)
			continue
		}
		st, te := summarize(s.Start), summarize(s.Term)
		x := "—"
		if tini > 0 {
			x = fmt.Sprintf("%.1f×", float64(st.P50)/float64(tini))
		}
		term, term90 := "—", "—"
		if te.N > 0 {
			term, term90 = ms(te.P50)+" ms", ms(te.P90)+" ms"
		}
		self, uss, pss := "—", "—", "—"
		if m := s.Self; m != nil {
			self, uss = mb(m.RSSKB), mb(m.USSKB)
			pss = fmt.Sprintf("%s (%s + %s)", mb(m.PssKB), mb(m.PssAnonKB), mb(m.PssFileKB))
		}
		ns := "—"
		if m := s.NSInit; m != nil {
			ns = fmt.Sprintf("%s / %s / %s", mb(m.RSSKB), mb(m.USSKB), mb(m.PssKB))
		}
		w.p("| %s | %s ms | %s ms | %s | %s | %s | %s | %s | %s | %s |", s.Label, ms(st.P50), ms(st.P90), x, term, term90, self, uss, pss, ns)
	}
	w.p("")
	w.p("Targets (issue 35):")
	w.p("")
	for _, s := range in.Systems {
		if s.Err == "" && strings.HasPrefix(s.Label, "a minimal Go init") && tini > 0 {
			p50 := summarize(s.Start).P50
			w.p("* the floor, a minimal Go init (bench/goinit: the Go runtime's start, fork, exec, wait): start-to-exit p50 %s ms = %.1f × tini's",
				ms(p50), float64(p50)/float64(tini))
		}
	}
	for _, s := range in.Systems {
		if s.Err != "" || !strings.HasPrefix(s.Label, "leaderrun") {
			continue
		}
		p50 := summarize(s.Start).P50
		limit, what := targetInitStartX, "default mode"
		if strings.Contains(s.Label, "=false") {
			limit, what = targetInitStartNoNSX, "--pid-namespace=false"
		}
		if tini > 0 {
			w.p("* start-to-exit p50, %s: %s ms = %.1f × tini's %s ms; target ≤ %.0f×: %s", what, ms(p50),
				float64(p50)/float64(tini), ms(tini), limit, met(float64(p50) <= limit*float64(tini)))
		}
		if te := summarize(s.Term); te.N > 0 {
			w.p("* SIGTERM → exit p50, %s: %s ms; target ≤ %s ms: %s", what, ms(te.P50), ms(targetInitTerm), met(te.P50 <= targetInitTerm))
		}
		if m := s.NSInit; m != nil {
			w.p("* the namespace init's own memory: USS %s, Pss %s; target ≤ 2 MB: %s", mb(m.USSKB), mb(m.PssKB), met(m.USSKB <= targetNSInitKB))
		}
		if m := s.Self; m != nil {
			w.p("* the replica's RSS while its command runs, %s: %s; target ≤ 20 MB: %s", what, mb(m.RSSKB), met(m.RSSKB <= targetInitIdleReplicaK))
		}
	}
	if busy, ok := r.Busy["init"]; ok {
		w.p("")
		w.p("The whole machine kept %.2f CPUs busy on average during this section.", busy)
	}
	w.p("")
}

func mb(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }
