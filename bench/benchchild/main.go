// Command benchchild is the command the benchmark runs under leaderrun and
// etcdctl lock. It records the CLOCK_MONOTONIC reading at which it started
// in DIR/start-PID (written to a temporary name and renamed, so a watcher
// never reads half a file), then either exits (-mode exit) or waits for
// SIGTERM, SIGINT or SIGHUP and records the reading at which it got it in
// DIR/stop-PID before exiting 0. It exits on its own after -max.
//
// Each file holds one line: "pid ppid mono_ns token", where token is
// LEADERRUN_TOKEN, or "-" when unset.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/bench/internal/mono"
)

func main() {
	started := mono.Now()
	dir := flag.String("dir", "", "directory to record start and stop in")
	mode := flag.String("mode", "hold", "hold: wait for a stop signal; exit: exit at once")
	maxLife := flag.Duration("max", 30*time.Minute, "exit after this long in any case")
	flag.Parse()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := record(*dir, "start", started); err != nil {
		fmt.Fprintln(os.Stderr, "benchchild:", err)
		os.Exit(1)
	}
	if *mode == "exit" {
		return
	}
	select {
	case <-sigs:
		record(*dir, "stop", mono.Now())
	case <-time.After(*maxLife):
	}
}

func record(dir, what string, at int64) error {
	token := os.Getenv("LEADERRUN_TOKEN")
	if token == "" {
		token = "-"
	}
	line := fmt.Sprintf("%d %d %d %s\n", os.Getpid(), os.Getppid(), at, token)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s-%d", what, os.Getpid()))
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("%s-%d", what, os.Getpid())))
}
