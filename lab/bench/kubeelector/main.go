// Command kubeelector is the benchmark's client-go peer on Kubernetes: a
// replica that campaigns for a Lease with client-go's own leader election
// (k8s.io/client-go/tools/leaderelection, a resourcelock.LeaseLock made by
// resourcelock.NewFromKubeconfig) at client-go's customary timings —
// LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s — with
// ReleaseOnCancel, and runs a command while it leads:
//
//	kubeelector -kubeconfig PATH -namespace NS -name LEASE -- COMMAND [ARG...]
//
// It is what a careful user writes in a few lines around client-go, not a
// supervisor: on becoming leader it starts COMMAND in a process group of
// its own, with a parent-death signal (SIGKILL), so that the command does
// not outlive a replica that is SIGKILLed; on SIGTERM, SIGINT or SIGHUP it
// sends SIGTERM to the command's group, waits for the command to exit (up
// to 5 s, then SIGKILL), and only then cancels the election's context, so
// that client-go releases the Lease (an empty holderIdentity), and exits 0.
// A follower told to stop only cancels and exits. A command that exits on
// its own ends the tenure the same way, and the replica exits with 1; a
// lost Lease kills the command's group and exits with 1.
//
// It prints "elected" when it starts leading, and "standing by" once it
// has read the Lease and seen another holder (client-go's OnNewLeader):
// the benchmark waits for these lines, as it does for leaderrun's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// client-go's customary timings (the defaults of kube-controller-manager's
// and kube-scheduler's --leader-elect-* flags).
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// killGrace is how long a command has to exit after SIGTERM.
const killGrace = 5 * time.Second

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server and the user")
	namespace := flag.String("namespace", "", "the Lease's namespace")
	name := flag.String("name", "", "the Lease's name")
	id := flag.String("id", "", "this replica's identity (default HOSTNAME_PID)")
	flag.Parse()
	if *namespace == "" || *name == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: kubeelector -kubeconfig PATH -namespace NS -name LEASE -- COMMAND [ARG...]")
		os.Exit(2)
	}
	if *id == "" {
		host, _ := os.Hostname()
		*id = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	os.Exit(run(*kubeconfig, *namespace, *name, *id, flag.Args()))
}

func run(kubeconfig, namespace, name, id string, argv []string) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeelector:", err)
		return 1
	}
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, namespace, name,
		resourcelock.ResourceLockConfig{Identity: id}, cfg, renewDeadline)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeelector:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &replica{argv: argv, cancel: cancel}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { r.lead() },
			OnStoppedLeading: func() {},
			OnNewLeader: func(holder string) {
				if holder != "" && holder != id {
					fmt.Printf("standing by: %s holds %s\n", holder, name)
				}
			},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeelector:", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// Ends with the first stop signal or when the election ends.
	ran := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Printf("stopping on %v\n", s)
			r.stop()
		case <-ran:
		}
	}()
	le.Run(ctx)
	close(ran)
	return r.exitCode()
}

// replica is the command's side of one elector.
type replica struct {
	argv   []string
	cancel context.CancelFunc // ends the election (and releases the Lease)

	mu       sync.Mutex    // guards the fields below
	child    *exec.Cmd     // the running command, nil before lead
	exited   chan struct{} // closed once child has been reaped
	stopping bool          // stop was called
	failed   bool          // the tenure ended otherwise than by stop
}

// lead starts the command; client-go calls it in a goroutine of its own
// once the Lease is this replica's.
func (r *replica) lead() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	fmt.Println("elected")
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "kubeelector:", err)
		r.failed = true
		r.cancel()
		return
	}
	r.child, r.exited = cmd, make(chan struct{})
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		close(r.exited)
		if !r.stopping {
			fmt.Fprintln(os.Stderr, "kubeelector: command exited while leading:", describe(err))
			r.failed = true
			r.cancel()
		}
		r.mu.Unlock()
	}()
}

// stop stops the command, if any, and then ends the election.
func (r *replica) stop() {
	r.mu.Lock()
	r.stopping = true
	child, exited := r.child, r.exited
	r.mu.Unlock()
	if child != nil {
		terminate(child, exited)
	}
	r.cancel()
}

// exitCode is the replica's exit status once the election has ended. A
// tenure that ended without stop (the Lease was lost) kills the command.
func (r *replica) exitCode() int {
	r.mu.Lock()
	child, exited, stopping := r.child, r.exited, r.stopping
	if !stopping {
		r.failed = true
		r.stopping = true
	}
	failed := r.failed
	r.mu.Unlock()
	if child != nil && !stopping {
		fmt.Fprintln(os.Stderr, "kubeelector: the election ended; killing the command")
		syscall.Kill(-child.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	if failed {
		return 1
	}
	return 0
}

// terminate sends SIGTERM to the command's process group and waits for
// the command to exit, sending SIGKILL after killGrace.
func terminate(child *exec.Cmd, exited <-chan struct{}) {
	syscall.Kill(-child.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(killGrace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		syscall.Kill(-child.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

func describe(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
