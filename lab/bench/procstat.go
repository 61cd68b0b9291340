package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat.
var clockTick = func() time.Duration {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return time.Second / time.Duration(n)
		}
	}
	return 10 * time.Millisecond // USER_HZ on Linux
}()

// statFields returns the fields of /proc/PID/stat after the command name;
// index 0 is the state (field 3 of proc(5)).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// cpuTime is utime+stime of pid (all its threads).
func cpuTime(pid int) (time.Duration, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	s, err2 := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return time.Duration(u+s) * clockTick, nil
}

func parentPid(pid int) int {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// statusKB reads a "kB" line of /proc/PID/status (VmRSS, VmHWM).
func statusKB(pid int, key string) (int64, error) {
	f, err := statusFields(pid, key)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// statusFields returns the fields of the line key of /proc/PID/status.
func statusFields(pid int, key string) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && k == key && len(f) >= 1 {
			return f, nil
		}
	}
	return nil, fmt.Errorf("/proc/%d/status has no %s", pid, key)
}

// cpuSum is the summed CPU time of pids; processes that are gone count 0.
func cpuSum(pids []int) time.Duration {
	var t time.Duration
	for _, p := range pids {
		if c, err := cpuTime(p); err == nil {
			t += c
		}
	}
	return t
}

// cpuTotals reads the first line of /proc/stat: the time all CPUs spent
// busy, and in all states, in clock ticks.
func cpuTotals() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i < 8 { // user nice system idle iowait irq softirq steal; guest is in user
			total += n
			if i != 3 && i != 4 {
				busy += n
			}
		}
	}
	return busy, total
}

// machineBusy starts measuring how many CPUs the whole machine keeps busy
// (everything on it, the benchmark included); the returned function ends
// the measurement.
func machineBusy() func() float64 {
	b0, t0 := cpuTotals()
	return func() float64 {
		b1, t1 := cpuTotals()
		if t1 <= t0 {
			return 0
		}
		return float64(b1-b0) / float64(t1-t0) * float64(runtime.NumCPU())
	}
}
