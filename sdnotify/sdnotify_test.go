package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// receiveTimeout bounds every read from the test socket.
const receiveTimeout = 5 * time.Second

// listen binds a unixgram socket at addr (a path or "@name") and points
// NOTIFY_SOCKET at it.
func listen(t *testing.T, addr string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", addr)
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	return conn
}

func pathSocket(t *testing.T) *net.UnixConn {
	return listen(t, filepath.Join(t.TempDir(), "notify.sock"))
}

// receive returns the next datagram, failing the test after receiveTimeout.
func receive(t *testing.T, conn *net.UnixConn, d time.Duration) string {
	t.Helper()
	msg, err := tryReceive(conn, d)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return msg
}

func tryReceive(conn *net.UnixConn, d time.Duration) (string, error) {
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// expectNothing fails if a datagram arrives within d.
func expectNothing(t *testing.T, conn *net.UnixConn, d time.Duration) {
	t.Helper()
	msg, err := tryReceive(conn, d)
	if err == nil {
		t.Fatalf("received %q, want nothing", msg)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("receive: %v", err)
	}
}

func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(*Notifier) error
		want string
	}{
		{"ready", (*Notifier).Ready, "READY=1"},
		{"stopping", (*Notifier).Stopping, "STOPPING=1"},
		{"status", func(n *Notifier) error { return n.Status("leader (token 42)") }, "STATUS=leader (token 42)"},
		{"status newlines", func(n *Notifier) error { return n.Status("standby\nleader a\r\nb\rc") }, "STATUS=standby leader a b c"},
		{"raw", func(n *Notifier) error { return n.Notify("READY=1\nSTATUS=standby") }, "READY=1\nSTATUS=standby"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := pathSocket(t)
			n := FromEnv()
			if n == nil {
				t.Fatal("FromEnv() = nil with NOTIFY_SOCKET set")
			}
			if err := tc.send(n); err != nil {
				t.Fatalf("send: %v", err)
			}
			if got, want := receive(t, conn, receiveTimeout), tc.want; got != want {
				t.Errorf("datagram = %q, want %q", got, want)
			}
		})
	}
}

func TestOneDatagramPerMessage(t *testing.T) {
	conn := pathSocket(t)
	n := FromEnv()
	for _, msg := range []string{"READY=1", "STATUS=a", "STOPPING=1"} {
		if err := n.Notify(msg); err != nil {
			t.Fatalf("Notify(%q): %v", msg, err)
		}
	}
	for _, want := range []string{"READY=1", "STATUS=a", "STOPPING=1"} {
		if got := receive(t, conn, receiveTimeout); got != want {
			t.Errorf("datagram = %q, want %q", got, want)
		}
	}
}

func TestAbstractSocket(t *testing.T) {
	addr := fmt.Sprintf("@leaderrun-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	conn := listen(t, addr)
	if err := FromEnv().Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if got, want := receive(t, conn, receiveTimeout), "READY=1"; got != want {
		t.Errorf("datagram = %q, want %q", got, want)
	}
}

func TestNoSocketListening(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "absent.sock"))
	if err := FromEnv().Ready(); err == nil {
		t.Error("Ready to a missing socket = nil, want an error")
	}
}

func TestUnsupportedAddress(t *testing.T) {
	for _, sock := range []string{"vsock:2:1234", "relative.sock", "@"} {
		t.Setenv("NOTIFY_SOCKET", sock)
		n := FromEnv()
		if n == nil {
			t.Fatalf("FromEnv() with NOTIFY_SOCKET=%q = nil, want a Notifier that reports the problem", sock)
		}
		if err := n.Ready(); err == nil {
			t.Errorf("Ready with NOTIFY_SOCKET=%q = nil, want an error", sock)
		}
	}
}

func TestNilNotifier(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "1000000")
	n := FromEnv()
	if n != nil {
		t.Fatalf("FromEnv() without NOTIFY_SOCKET = %+v, want nil", n)
	}
	for name, err := range map[string]error{
		"Ready":    n.Ready(),
		"Stopping": n.Stopping(),
		"Status":   n.Status("x"),
		"Notify":   n.Notify("READY=1"),
	} {
		if err != nil {
			t.Errorf("nil %s() = %v, want nil", name, err)
		}
	}
	if got := n.WatchdogInterval(); got != 0 {
		t.Errorf("nil WatchdogInterval() = %v, want 0", got)
	}
	done := make(chan struct{})
	go func() {
		n.RunWatchdog(context.Background(), func() bool { return true })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(receiveTimeout):
		t.Fatal("nil RunWatchdog did not return")
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name      string
		usec, pid string
		want      time.Duration
	}{
		{"unset", "", "", 0},
		{"usec only", "10000000", "", 5 * time.Second},
		{"our pid", "3000000", self, 1500 * time.Millisecond},
		{"odd microseconds", "3", "", 1500 * time.Nanosecond},
		{"other pid", "10000000", strconv.Itoa(os.Getpid() + 1), 0},
		{"bad pid", "10000000", "init", 0},
		{"zero", "0", "", 0},
		{"negative", "-5", "", 0},
		{"not a number", "10s", "", 0},
		{"near its maximum", "9223372036854775807", "", 12 * time.Hour},
		{"a year", "31536000000000", "", 12 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			if got, want := FromEnv().WatchdogInterval(), tc.want; got != want {
				t.Errorf("WatchdogInterval() = %v, want %v", got, want)
			}
		})
	}
}

func TestRunWatchdog(t *testing.T) {
	conn := pathSocket(t)
	t.Setenv("WATCHDOG_USEC", "40000") // every 20ms
	n := FromEnv()
	if got, want := n.WatchdogInterval(), 20*time.Millisecond; got != want {
		t.Fatalf("WatchdogInterval() = %v, want %v", got, want)
	}

	var healthy atomic.Bool
	healthy.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		n.RunWatchdog(ctx, healthy.Load)
		close(done)
	}()

	for i := range 3 {
		if got, want := receive(t, conn, receiveTimeout), "WATCHDOG=1"; got != want {
			t.Fatalf("datagram %d = %q, want %q", i, got, want)
		}
	}

	healthy.Store(false)
	// A keep-alive decided just before the switch may still be in flight.
	if msg, err := tryReceive(conn, 30*time.Millisecond); err == nil && msg != "WATCHDOG=1" {
		t.Fatalf("datagram = %q, want WATCHDOG=1 or nothing", msg)
	}
	expectNothing(t, conn, 150*time.Millisecond)

	healthy.Store(true)
	if got, want := receive(t, conn, receiveTimeout), "WATCHDOG=1"; got != want {
		t.Fatalf("datagram after recovery = %q, want %q", got, want)
	}

	cancel()
	select {
	case <-done:
	case <-time.After(receiveTimeout):
		t.Fatal("RunWatchdog did not return after ctx ended")
	}
	// Drain what was sent before cancel, then expect silence.
	for {
		if _, err := tryReceive(conn, 10*time.Millisecond); err != nil {
			break
		}
	}
	expectNothing(t, conn, 100*time.Millisecond)
}

func TestRunWatchdogEndedContext(t *testing.T) {
	conn := pathSocket(t)
	t.Setenv("WATCHDOG_USEC", "40000")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		FromEnv().RunWatchdog(ctx, nil)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(receiveTimeout):
		t.Fatal("RunWatchdog with an ended ctx did not return")
	}
	expectNothing(t, conn, 50*time.Millisecond)
}

func TestRunWatchdogDisabled(t *testing.T) {
	conn := pathSocket(t) // WATCHDOG_USEC is empty
	done := make(chan struct{})
	go func() {
		FromEnv().RunWatchdog(context.Background(), nil)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(receiveTimeout):
		t.Fatal("RunWatchdog without WATCHDOG_USEC did not return")
	}
	expectNothing(t, conn, 50*time.Millisecond)
}

func ExampleNotifier() {
	n := FromEnv() // nil outside systemd; the calls below then do nothing
	_ = n.Ready()
	_ = n.Status("standby; leader is db-2")
	ctx, cancel := context.WithCancel(context.Background())
	go n.RunWatchdog(ctx, func() bool { return true })
	// ... run ...
	cancel()
	_ = n.Stopping()
}
