// Package sdnotify implements the client side of systemd's notify protocol
// for services with Type=notify: readiness, status lines, stopping, and the
// watchdog keep-alive.
//
// A message is one datagram of newline-separated VARIABLE=value assignments
// sent to the unix datagram socket named by $NOTIFY_SOCKET: an absolute
// path, or "@name" for a socket in Linux's abstract namespace. Each message
// is sent on a socket of its own, so a Notifier is safe for concurrent use
// and holds no file descriptor between messages.
//
// Outside systemd $NOTIFY_SOCKET is unset, FromEnv returns nil, and every
// method of a nil *Notifier does nothing, so callers need no checks.
//
// The protocol is described in sd_notify(3) and systemd.service(5).
package sdnotify

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// writeTimeout bounds a send to a receiver whose queue is full, so that a
// stuck service manager cannot stall the caller.
const writeTimeout = time.Second

// Notifier sends notifications to the service manager. It does not change
// after FromEnv returns it.
type Notifier struct {
	addr     *net.UnixAddr // nil when badAddr is set
	badAddr  error         // why $NOTIFY_SOCKET cannot be used
	watchdog time.Duration // WatchdogInterval, 0 when disabled
}

// FromEnv reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID. It returns nil
// when NOTIFY_SOCKET is unset or empty. It leaves the environment as it is;
// a caller that starts other processes decides whether they see it.
//
// A NOTIFY_SOCKET that is neither an absolute path nor "@name" (systemd's
// vsock addresses, for example) still yields a Notifier, whose every send
// returns an error saying so.
func FromEnv() *Notifier {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return nil
	}
	n := &Notifier{watchdog: watchdogInterval(os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID"), os.Getpid())}
	if strings.HasPrefix(sock, "/") || (strings.HasPrefix(sock, "@") && len(sock) > 1) {
		// The net package maps a leading '@' to the abstract namespace.
		n.addr = &net.UnixAddr{Name: sock, Net: "unixgram"}
	} else {
		n.badAddr = fmt.Errorf("NOTIFY_SOCKET %q: not an absolute path or @name", sock)
	}
	return n
}

// watchdogInterval is half of usec microseconds when usec is a positive
// integer and pid is empty or equal to self; 0 otherwise.
func watchdogInterval(usec, pid string, self int) time.Duration {
	if pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil || p != self {
			return 0
		}
	}
	u, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || u == 0 {
		return 0
	}
	// Bound it before multiplying: near its maximum the product would
	// wrap to a few nanoseconds and flood the service manager.
	if u > uint64(maxWatchdog/time.Microsecond) {
		return maxWatchdog / 2
	}
	return time.Duration(u) * time.Microsecond / 2
}

// maxWatchdog caps WATCHDOG_USEC: keep-alives at least every half day.
const maxWatchdog = 24 * time.Hour

// Ready tells the service manager that start-up has finished ("READY=1").
func (n *Notifier) Ready() error { return n.Notify("READY=1") }

// Stopping tells the service manager that the service is shutting down
// ("STOPPING=1").
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Status sets the one-line status that systemctl status shows
// ("STATUS=s"). Newlines in s become spaces, since a newline would start a
// new assignment.
func (n *Notifier) Status(s string) error {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	return n.Notify("STATUS=" + s)
}

// Notify sends state as one datagram, unchanged: one or more
// newline-separated assignments such as "READY=1\nSTATUS=standby". It
// returns nil without sending on a nil Notifier.
func (n *Notifier) Notify(state string) error {
	if n == nil {
		return nil
	}
	if n.badAddr != nil {
		return fmt.Errorf("sd_notify: %w", n.badAddr)
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.addr.Name, err)
	}
	return nil
}

// WatchdogInterval is how often to send "WATCHDOG=1": half of WATCHDOG_USEC
// when that is set and WATCHDOG_PID is unset or names this process, and 0
// (no watchdog) otherwise or on a nil Notifier.
func (n *Notifier) WatchdogInterval() time.Duration {
	if n == nil {
		return 0
	}
	return n.watchdog
}

// RunWatchdog sends "WATCHDOG=1" at once and then every WatchdogInterval,
// skipping each keep-alive for which healthy returns false (a nil healthy
// counts as always true), so that the service manager acts on an unhealthy
// process once WATCHDOG_USEC passes. It returns when ctx ends, or at once
// when there is no watchdog. Send errors are ignored: the service manager
// notices missing keep-alives by itself.
func (n *Notifier) RunWatchdog(ctx context.Context, healthy func() bool) {
	interval := n.WatchdogInterval()
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		if healthy == nil || healthy() {
			_ = n.Notify("WATCHDOG=1")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
