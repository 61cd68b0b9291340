// Command startcmp compares builds of leaderrun on what a process start
// costs, interleaved, so that a shared machine's slow and quiet moments fall
// on every build alike: it tells whether a start-up tuning pays.
//
//	cd lab && go run ./bench/startcmp -runs 40 base=/tmp/lr-base without-x=/tmp/lr-x
//
// Each round runs every build (in an order that rotates) for:
//   - `leaderrun version`: fork to exit, and its minor page faults;
//   - `leaderrun --once --store sqlite:FILE -- benchchild`, in the default
//     mode (a PID namespace) and with --pid-namespace=false: fork to the
//     child's first clock reading (start to exec);
//
// then, once, each build's idle replica on SQLite (`-- sleep`), after
// -settle: VmRSS, RssAnon and RssFile of leaderrun and of its namespace's
// init. It prints p50 and p90 per build, and the load average before and
// after. Build each variant as `make build` does (make build OUT=…).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// build is one leaderrun binary under comparison and its samples.
type build struct {
	name, path     string
	version        []time.Duration
	faults         []float64
	execNS, execNo []time.Duration
}

func main() {
	runs := flag.Int("runs", 40, "rounds")
	settle := flag.Duration("settle", 4*time.Second, "how long an idle replica runs before its memory is read")
	flag.Parse()
	var builds []*build
	for _, a := range flag.Args() {
		name, path, ok := strings.Cut(a, "=")
		if !ok {
			fail(fmt.Errorf("%q: want NAME=PATH", a))
		}
		builds = append(builds, &build{name: name, path: path})
	}
	if len(builds) == 0 {
		fail(fmt.Errorf("no builds given (NAME=PATH ...)"))
	}
	tmp, err := os.MkdirTemp("", "startcmp-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	child := filepath.Join(tmp, "benchchild")
	if out, err := exec.Command("go", "build", "-o", child, "./bench/benchchild").CombinedOutput(); err != nil {
		fail(fmt.Errorf("go build ./bench/benchchild (run from lab/): %v\n%s", err, out))
	}
	fmt.Printf("load average before: %s\n", loadavg())
	for round := range *runs {
		for k := range builds {
			b := builds[(round+k)%len(builds)]
			if err := b.sample(tmp, child); err != nil {
				fail(fmt.Errorf("%s: %w", b.name, err))
			}
		}
	}
	fmt.Printf("load average after: %s\n\n", loadavg())
	fmt.Printf("%d rounds; p50 / p90\n\n", *runs)
	fmt.Println("| build | `version` fork → exit | its minor faults | start-to-exec, default mode | start-to-exec, --pid-namespace=false |")
	fmt.Println("|---|---|---|---|---|")
	for _, b := range builds {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", b.name, pq(b.version), fq(b.faults), pq(b.execNS), pq(b.execNo))
	}
	fmt.Println()
	fmt.Println("| build | idle replica: VmRSS / RssAnon / RssFile (MB) | its namespace init: VmRSS / RssAnon / RssFile (MB) |")
	fmt.Println("|---|---|---|")
	for _, b := range builds {
		lr, init, err := b.idle(tmp, *settle)
		if err != nil {
			fail(fmt.Errorf("%s: %w", b.name, err))
		}
		fmt.Printf("| %s | %s | %s |\n", b.name, lr, init)
	}
}

// sample runs one round of b's starts.
func (b *build) sample(tmp, child string) error {
	t0 := mono.Now()
	cmd := exec.Command(b.path, "version")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	b.version = append(b.version, time.Duration(mono.Now()-t0))
	b.faults = append(b.faults, float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Minflt))
	for _, ns := range []bool{true, false} {
		d, err := b.once(tmp, child, ns)
		if err != nil {
			return err
		}
		if ns {
			b.execNS = append(b.execNS, d)
		} else {
			b.execNo = append(b.execNo, d)
		}
	}
	return nil
}

// once runs `leaderrun --once -- benchchild -mode exit` and returns the time
// from just before the fork to the child's start reading.
func (b *build) once(tmp, child string, ns bool) (time.Duration, error) {
	dir, err := os.MkdirTemp(tmp, "once-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	t0 := mono.Now()
	out, err := exec.Command(b.path, "--name", "startcmp", "--store", "sqlite:"+filepath.Join(tmp, b.name+".db"),
		"--once", "--log-level", "warn", "--pid-namespace="+strconv.FormatBool(ns),
		"--", child, "-dir", dir, "-mode", "exit").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("--once: %v\n%s", err, out)
	}
	marks, _ := filepath.Glob(filepath.Join(dir, "start-*"))
	if len(marks) != 1 {
		return 0, fmt.Errorf("--once: %d start marks", len(marks))
	}
	line, err := os.ReadFile(marks[0])
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(line))
	if len(f) < 3 {
		return 0, fmt.Errorf("malformed mark %q", line)
	}
	at, err := strconv.ParseInt(f[2], 10, 64)
	return time.Duration(at - t0), err
}

// idle runs an idle replica of b on SQLite for settle and returns the
// memory of leaderrun and of its namespace's init.
func (b *build) idle(tmp string, settle time.Duration) (lr, init string, err error) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return "", "", err
	}
	cmd := exec.Command(b.path, "--name", "startcmp-idle", "--store", "sqlite:"+filepath.Join(tmp, b.name+"-idle.db"),
		"--log-level", "warn", "--", sleep, "3600")
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	time.Sleep(settle)
	lr, init = memory(cmd.Process.Pid), "none found"
	for _, c := range children(cmd.Process.Pid) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); strings.Contains(exe, "leaderrun-init") || exe == b.path {
			init = memory(c)
		}
	}
	return lr, init, nil
}

// memory is "VmRSS / RssAnon / RssFile" of pid in MB.
func memory(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	kb := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			if f := strings.Fields(v); len(f) == 2 && f[1] == "kB" {
				kb[k], _ = strconv.ParseFloat(f[0], 64)
			}
		}
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f", kb["VmRSS"]/1024, kb["RssAnon"]/1024, kb["RssFile"]/1024)
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if f := strings.Fields(string(b[i+1:])); i >= 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

func pq(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return "–"
	}
	at := func(p float64) float64 { return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / 1e6 }
	return fmt.Sprintf("%.2f / %.2f ms", at(0.5), at(0.9))
}

func fq(fs []float64) string {
	s := slices.Clone(fs)
	slices.Sort(s)
	if len(s) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f / %.0f", s[len(s)/2], s[min(len(s)-1, int(0.9*float64(len(s))))])
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "startcmp:", err)
	os.Exit(1)
}
