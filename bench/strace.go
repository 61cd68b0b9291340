package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/bench/internal/mono"
)

// syscallCounts maps a system call's name to how often it was made.
type syscallCounts map[string]int64

// parseStraceSummary reads the table `strace -c` writes.
func parseStraceSummary(path string) (syscallCounts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := syscallCounts{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || fs[0] == "%" || strings.HasPrefix(fs[0], "-") || fs[len(fs)-1] == "total" {
			continue
		}
		n, err := strconv.ParseInt(fs[3], 10, 64)
		if err != nil {
			continue
		}
		out[fs[len(fs)-1]] += n
	}
	return out, sc.Err()
}

func (c syscallCounts) fsyncs() int64 { return c["fsync"] + c["fdatasync"] }

// straceAttach counts the system calls of pids (every thread) for window,
// then detaches. It returns the counts and the measured window.
func (b *bench) straceAttach(label string, pids []int, window time.Duration) (syscallCounts, time.Duration, error) {
	out := b.tmpPath(sanitize(label) + ".strace")
	argv := []string{b.strace, "-f", "-c", "-o", out}
	var markers []string
	for _, p := range pids {
		argv = append(argv, "-p", strconv.Itoa(p))
		markers = append(markers, fmt.Sprintf("Process %d attached", p))
	}
	sp, err := b.procs.start("strace-"+label, argv, nil, markers...)
	if err != nil {
		return nil, 0, err
	}
	for _, m := range markers {
		if err := sp.waitMark(m, 10*time.Second); err != nil {
			sp.killGroup(syscall.SIGKILL)
			return nil, 0, err
		}
	}
	t0 := mono.Now()
	b.sleep(window)
	syscall.Kill(sp.pid, syscall.SIGINT)
	got := mono.Since(t0)
	if !sp.wait(20 * time.Second) {
		sp.killGroup(syscall.SIGKILL)
		return nil, 0, fmt.Errorf("strace did not detach")
	}
	counts, err := parseStraceSummary(out)
	return counts, got, err
}
