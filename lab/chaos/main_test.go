package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/supervise"
)

var (
	flagRounds     = flag.Int("chaos.rounds", 0, "faults per run; 0: the short mode's schedule, or 150 with LEADERRUN_CHAOS=long")
	flagSeed       = flag.Int64("chaos.seed", 0, "seed of the fault schedule (and of the partition count); 0: from the clock (printed)")
	flagStore      = flag.String("chaos.store", "", "stores to test, comma-separated (default: every store: sqlite,postgres,mysql,redis,etcd,k8s)")
	flagPartitions = flag.Int("chaos.partitions", 0, "partitions of the partitioned runs (on every store of -chaos.store); "+
		"0: 4 to 8, drawn from the seed; -1: no partitioned runs")
	// Ten runs at once, each three replicas and their commands, left a
	// 2-core machine whose process starts cost 35 ms of CPU (2026-12-02)
	// too loaded to meet the TTL-bound checks (failures on every store);
	// four at once still missed one bound by 371 ms; two leave it room.
	flagParallel = flag.Int("chaos.parallel", 2, "runs (store × mode) at once")
	flagFaults   = flag.String("chaos.faults", "", "with -chaos.rounds: draw only from these faults, comma-separated (default: every fault of the store)")
	flagBin      = flag.String("chaos.bin", "", "a prebuilt leaderrun binary (default: go build the module's)")
	flagKeep     = flag.Bool("chaos.keep", false, "keep each run's directory (event log, replicas' logs) and print its path")
	flagBound    = flag.Duration("chaos.bound", time.Second, "how much longer than the TTL (plus, partitioned, the reconcile interval) a fault may leave a name or partition without a child")
	flagStrict   = flag.Bool("chaos.strict", false, "fail on known defects too")
	flagTTL      = flag.Duration("chaos.ttl", 3*time.Second, "--ttl of the replicas")
	flagGrace    = flag.Duration("chaos.kill-grace", time.Second, "--kill-grace of the replicas")
	flagNS       = flag.Bool("chaos.pid-namespace", false, "run the replicas in leaderrun's default mode (the child in a PID namespace of its own) instead of with --pid-namespace=false; an escaped grandchild surviving a SIGKILL of leaderrun is then a violation, not known defect D1")
	flagInject   = flag.Float64("chaos.min-injected", 0.8, "fraction of the faults that must be injected; fewer fails the run")
	flagFlap     = flag.Float64("chaos.health-flap", 0.2, "one name: the fraction of the replicas' health checks (--health-cmd, every 300ms, 2 retries, 2s cooldown) that fail at random, moving the name or restarting the command beside the faults; 0: no health check")
)

// longRounds is the rounds per store of LEADERRUN_CHAOS=long.
const longRounds = 150

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case roleChild:
		os.Exit(childMain())
	case roleGrandchild:
		os.Exit(grandchildMain())
	}
	flag.Parse()
	if *flagStore == "" {
		// Not the flag's default: files built with a tag add to
		// storeKinds in init, after the flags are declared.
		*flagStore = strings.Join(storeKinds, ",")
	}
	commandCgroups = supervise.ReclaimCgroups(nil)
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// rounds is how many faults to inject per store; 0 means the short
// schedule.
func rounds() int {
	if *flagRounds > 0 {
		return *flagRounds
	}
	if os.Getenv("LEADERRUN_CHAOS") == "long" {
		return longRounds
	}
	return 0
}

// commandCgroups is whether leaderrun gives commands cgroups of their own
// here (cgroup v2, as root or delegated): a follower then kills what a
// SIGKILLed leaderrun's command left before its own command starts.
var commandCgroups bool

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// leaderrunBinary builds leaderrun (CGO_ENABLED=0) once
// per test binary, or returns -chaos.bin.
func leaderrunBinary(t *testing.T) string {
	t.Helper()
	if *flagBin != "" {
		return *flagBin
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "leaderrun-chaos-bin-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "leaderrun")
		start := time.Now()
		// From the product's own module (the repository, two levels up
		// from lab/chaos), with its go.mod and go.sum: what users build.
		c := exec.Command(goTool(), "build", "-o", buildBin, ".")
		c.Dir = filepath.Join("..", "..")
		c.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := c.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build leaderrun: %v\n%s", err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "chaos: built leaderrun in %v\n", time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// wantPartitioned reports whether the partitioned run on store is wanted.
func wantPartitioned(store string) bool { return *flagPartitions >= 0 && wantStore(store) }

func wantStore(name string) bool {
	for _, s := range strings.Split(*flagStore, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}
