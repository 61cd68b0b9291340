// Command benchchild is the command the benchmark runs under leaderrun and
// etcdctl lock. It records the CLOCK_MONOTONIC reading at which it started
// in DIR/start-PID (written to a temporary name and renamed, so a watcher
// never reads half a file), then either exits (-mode exit) or waits for
// SIGTERM, SIGINT or SIGHUP and records the reading at which it got it in
// DIR/stop-PID before exiting 0. It exits on its own after -max.
//
// With -lock, it first tries to take an exclusive flock on
// DIR/lock-PARTITION (PARTITION is LEADERRUN_PARTITION, or "name" when
// unset) without waiting, and keeps it until it exits: the kernel drops
// the lock only once the process is gone, so a child that finds the lock
// taken started while another child of the same partition was still alive.
// Such a child then waits for the lock in the background, so that it holds
// it once the other is gone and the next child is judged against it too.
//
// With -mode check it is a health check instead (see check).
//
// Each file holds one line: "pid ppid mono_ns token partition lock holder
// pidns", where token is LEADERRUN_TOKEN, partition LEADERRUN_PARTITION and
// holder LEADERRUN_HOLDER ("-" when unset), lock is 1 when the lock was
// taken, 0 when another process held it, and "-" without -lock, and pidns
// is the inode of the child's PID namespace. pid and ppid are the child's
// own view: in a PID namespace of its own (leaderrun's default) they are
// its pid there and 1, its init; pidns tells the benchmark where to look
// for it (see the benchmark's hostPid). The file is named
// start-PID-MONO_NS, unique also where every child is pid 2 of a namespace.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

func main() {
	started := mono.Now()
	dir := flag.String("dir", "", "directory to record start and stop in")
	mode := flag.String("mode", "hold", "hold: wait for a stop signal; exit: exit at once; check: a health check, failing while DIR/sick-HOLDER exists")
	maxLife := flag.Duration("max", 30*time.Minute, "exit after this long in any case")
	lock := flag.Bool("lock", false, "take an exclusive flock on DIR/lock-PARTITION and record whether it was free")
	flag.Parse()
	if *mode == "check" {
		check(*dir, started)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	locked := "-"
	if *lock {
		got, err := takeLock(*dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchchild:", err)
			os.Exit(1)
		}
		locked = "0"
		if got {
			locked = "1"
		}
	}
	if err := record(*dir, "start", started, locked); err != nil {
		fmt.Fprintln(os.Stderr, "benchchild:", err)
		os.Exit(1)
	}
	if *mode == "exit" {
		return
	}
	select {
	case <-sigs:
		record(*dir, "stop", mono.Now(), locked)
	case <-time.After(*maxLife):
	}
}

// takeLock tries to lock DIR/lock-PARTITION; the descriptor stays open
// (and the lock held) until the process exits.
func takeLock(dir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock-"+orDash(os.Getenv("LEADERRUN_PARTITION"), "name")), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return false, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		held = f
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		held = f
		go syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		return false, nil
	}
	f.Close()
	return false, err
}

// check is -mode check, a health check: it exits 0 unless DIR/sick-HOLDER
// exists (HOLDER is LEADERRUN_HOLDER), in which case it records the
// reading at which it ran in DIR/fail-PID-MONO_NS and exits 1.
func check(dir string, at int64) {
	if _, err := os.Stat(filepath.Join(dir, "sick-"+os.Getenv("LEADERRUN_HOLDER"))); err != nil {
		os.Exit(0)
	}
	record(dir, "fail", at, "-")
	os.Exit(1)
}

// held keeps the lock's file from being collected (and closed).
var held *os.File

func orDash(s, dash string) string {
	if s == "" {
		return dash
	}
	return s
}

func record(dir, what string, at int64, locked string) error {
	line := fmt.Sprintf("%d %d %d %s %s %s %s %d\n", os.Getpid(), os.Getppid(), at,
		orDash(os.Getenv("LEADERRUN_TOKEN"), "-"), orDash(os.Getenv("LEADERRUN_PARTITION"), "-"), locked,
		orDash(os.Getenv("LEADERRUN_HOLDER"), "-"), pidNamespace())
	name := fmt.Sprintf("%s-%d-%d", what, os.Getpid(), at)
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// pidNamespace is the inode of this process's PID namespace, 0 if unknown.
func pidNamespace() uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}
