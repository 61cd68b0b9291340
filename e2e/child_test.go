package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/signals"
)

// childMain is lrchild, the command the scripts run under leaderrun. It
// records what happened to it in files the scripts wait on and inspect.
func childMain() {
	fs := flag.NewFlagSet("lrchild", flag.ExitOnError)
	ready := fs.String("ready", "", "write `FILE` with pid and token once signal handlers are installed")
	record := fs.String("record", "", "append every signal received to `FILE`")
	ignoreTerm := fs.Bool("ignore-term", false, "record SIGTERM but keep running")
	exitCode := fs.Int("exit", -1, "exit at once with this code (after -ready)")
	termExit := fs.Int("term-exit", 0, "exit code after a signal of -exit-on")
	exitOn := fs.String("exit-on", "HUP,INT,QUIT,TERM", "signals to exit on, after recording them (comma-separated)")
	catchAll := fs.Bool("catch-all", false, "catch and record every signal from 1 to 31 that can be caught, not only those leaderrun forwards")
	killSelf := fs.String("kill-self", "", "die by this signal (after -ready)")
	escapee := fs.String("escapee", "", "start a grandchild that leaves the process group; write its pid to `FILE`")
	exitFile := fs.String("exitfile", "", "write `FILE` with the time this child exits after a signal")
	orphan := fs.String("orphan", "", "start a grandchild that outlives this child; write its pid to `FILE`")
	lock := fs.String("lock", "", "take an exclusive flock of `FILE` at once (LOCK_NB) and hold it, with every grandchild; "+
		"exit 99 and write FILE.busy if another process holds it")
	envFile := fs.String("env", "", "write the environment to `FILE`, a variable per line (before -ready)")
	ledger := fs.String("ledger", "", "append a line to `FILE` when this child starts (after -lock) and when it exits: "+
		"start|exit p=PARTITION token=TOKEN holder=HOLDER pid=PID at=UNIXNANO")
	member := fs.String("grandchild", "", "start a grandchild that stays in this child's process group (holding -lock) and outlives it; write its pid to `FILE`")
	sleeper := fs.String("sleeper", "", "(internal) become the escaped grandchild: setsid, then write the pid and session to `FILE`")
	stay := fs.String("stay", "", "(internal) become the grandchild that stays in the group: write the pid to `FILE`")
	fs.Parse(os.Args[1:])
	// In file names, %p stands for the partition (LEADERRUN_PARTITION).
	for _, f := range []*string{ready, record, escapee, exitFile, orphan, lock, envFile, member} {
		*f = strings.ReplaceAll(*f, "%p", os.Getenv("LEADERRUN_PARTITION"))
	}
	note := func(event string) {
		if *ledger != "" {
			appendLine(*ledger, fmt.Sprintf("%s p=%s token=%s holder=%s pid=%d at=%d", event, os.Getenv("LEADERRUN_PARTITION"),
				os.Getenv("LEADERRUN_TOKEN"), os.Getenv("LEADERRUN_HOLDER"), os.Getpid(), time.Now().UnixNano()))
		}
	}

	if *sleeper != "" {
		sid, err := syscall.Setsid()
		if err != nil {
			fmt.Fprintln(os.Stderr, "lrchild: setsid:", err)
			os.Exit(2)
		}
		writeFile(*sleeper, fmt.Sprintf("%d sid=%d", os.Getpid(), sid))
		select {}
	}
	if *stay != "" {
		writeFile(*stay, strconv.Itoa(os.Getpid()))
		for {
			time.Sleep(time.Hour)
		}
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append(signals.Forwarded, syscall.SIGURG, syscall.SIGPIPE)...)
	if *catchAll {
		for n := syscall.Signal(1); n <= 31; n++ {
			if n != syscall.SIGKILL && n != syscall.SIGSTOP {
				signal.Notify(sigs, n)
			}
		}
	}
	exits := map[os.Signal]bool{}
	for _, name := range strings.Split(*exitOn, ",") {
		sig, err := signals.Parse(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lrchild: -exit-on:", err)
			os.Exit(2)
		}
		exits[sig] = true
	}
	var held *os.File // the judge's lock, passed on to grandchildren
	if *lock != "" {
		held = takeLock(*lock)
	}
	if *escapee != "" {
		startSleeper(*escapee, held)
	}
	if *orphan != "" {
		startSleeper(*orphan, held)
	}
	if *member != "" {
		startGrandchild([]string{"-stay", *member}, *member, held)
	}
	if *envFile != "" {
		writeFile(*envFile, strings.Join(os.Environ(), "\n"))
	}
	note("start")
	if *ready != "" {
		pidns, _ := os.Readlink("/proc/self/ns/pid")
		writeFile(*ready, fmt.Sprintf("%d at=%d pidns=%s token=%s name=%s holder=%s", os.Getpid(), time.Now().UnixNano(), pidns,
			os.Getenv("LEADERRUN_TOKEN"), os.Getenv("LEADERRUN_NAME"), os.Getenv("LEADERRUN_HOLDER")))
	}
	if *exitCode >= 0 {
		note("exit")
		os.Exit(*exitCode)
	}
	if *killSelf != "" {
		sig, err := signals.Parse(*killSelf)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig)
		select {}
	}
	for s := range sigs {
		if *record != "" {
			appendLine(*record, signals.Name(s.(syscall.Signal)))
		}
		if exits[s] && !(s == syscall.SIGTERM && *ignoreTerm) {
			if *exitFile != "" {
				writeFile(*exitFile, fmt.Sprintf("at=%d", time.Now().UnixNano()))
			}
			note("exit")
			os.Exit(*termExit)
		}
	}
}

// startSleeper starts a grandchild that calls setsid, writes its pid and
// session id to pidfile and sleeps for ever, holding lock (when not nil).
// It returns once the grandchild has left this process's session.
func startSleeper(pidfile string, lock *os.File) {
	startGrandchild([]string{"-sleeper", pidfile}, pidfile, lock)
}

// startGrandchild starts lrchild with args and lock (when not nil), and
// returns once it has written pidfile.
func startGrandchild(args []string, pidfile string, lock *os.File) {
	c := exec.Command("lrchild", args...)
	if lock != nil {
		c.ExtraFiles = []*os.File{lock}
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "lrchild:", err)
		os.Exit(2)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(pidfile); err == nil {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "lrchild: the grandchild did not report")
			os.Exit(2)
		}
	}
}

// takeLock takes an exclusive flock of path without waiting. The lock
// belongs to the open file, which every grandchild inherits: the kernel
// frees it only when the last process holding it is dead. A busy lock means
// a process of an earlier tenure is still alive.
func takeLock(path string) *os.File {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lrchild:", err)
		os.Exit(2)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		writeFile(path+".busy", fmt.Sprintf("pid=%d token=%s err=%v", os.Getpid(), os.Getenv("LEADERRUN_TOKEN"), err))
		fmt.Fprintln(os.Stderr, "lrchild: lock busy: a process of an earlier tenure still runs")
		os.Exit(99)
	}
	return f
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
