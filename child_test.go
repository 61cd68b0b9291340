package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
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
	termExit := fs.Int("term-exit", 0, "exit code after a stop signal (TERM, INT, QUIT, HUP)")
	killSelf := fs.String("kill-self", "", "die by this signal (after -ready)")
	escapee := fs.String("escapee", "", "start a grandchild that leaves the process group; write its pid to `FILE`")
	exitFile := fs.String("exitfile", "", "write `FILE` with the time this child exits after a signal")
	orphan := fs.String("orphan", "", "start a grandchild that outlives this child; write its pid to `FILE`")
	sleeper := fs.Bool("sleeper", false, "(internal) become the escaped grandchild")
	fs.Parse(os.Args[1:])

	if *sleeper {
		syscall.Setsid()
		select {}
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append(signals.Forwarded, syscall.SIGURG, syscall.SIGPIPE)...)
	if *escapee != "" {
		writeFile(*escapee, fmt.Sprint(startSleeper()))
	}
	if *orphan != "" {
		writeFile(*orphan, fmt.Sprint(startSleeper()))
	}
	if *ready != "" {
		pidns, _ := os.Readlink("/proc/self/ns/pid")
		writeFile(*ready, fmt.Sprintf("%d at=%d pidns=%s token=%s name=%s holder=%s", os.Getpid(), time.Now().UnixNano(), pidns,
			os.Getenv("LEADERRUN_TOKEN"), os.Getenv("LEADERRUN_NAME"), os.Getenv("LEADERRUN_HOLDER")))
	}
	if *exitCode >= 0 {
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
		if signals.IsStop(s) && !(s == syscall.SIGTERM && *ignoreTerm) {
			if *exitFile != "" {
				writeFile(*exitFile, fmt.Sprintf("at=%d", time.Now().UnixNano()))
			}
			os.Exit(*termExit)
		}
	}
}

// startSleeper starts a grandchild that calls setsid and sleeps for ever.
func startSleeper() int {
	c := exec.Command("lrchild", "-sleeper")
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "lrchild:", err)
		os.Exit(2)
	}
	return c.Process.Pid
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
