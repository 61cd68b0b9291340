package tcpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line until the client closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("echo server did not stop")
		}
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a line and reads the answer, giving up after timeout.
func roundTrip(c net.Conn, line string, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func wantEcho(t *testing.T, c net.Conn, line string) {
	t.Helper()
	got, err := roundTrip(c, line, 5*time.Second)
	if err != nil {
		t.Fatalf("round trip %q: %v", line, err)
	}
	if got != line {
		t.Fatalf("echo = %q, want %q", got, line)
	}
}

func wantTimeout(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := roundTrip(c, "lost", 200*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("round trip while blackholed = %v, want a timeout", err)
	}
}

func TestPass(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	wantEcho(t, c, "hello")
	wantEcho(t, c, "again")
	if got, want := p.Mode(), ModePass; got != want {
		t.Errorf("Mode() = %v, want %v", got, want)
	}
}

func TestBlackholeDropsBytesOnOldAndNewConnections(t *testing.T) {
	p := newProxy(t)
	old := dial(t, p)
	wantEcho(t, old, "before")
	p.Blackhole()
	wantTimeout(t, old)
	fresh := dial(t, p) // accepted: a blackhole does not refuse
	wantTimeout(t, fresh)

	p.Pass()
	healed := dial(t, p)
	wantEcho(t, healed, "after")
}

func TestResetAbortsAndRefuses(t *testing.T) {
	p := newProxy(t)
	old := dial(t, p)
	wantEcho(t, old, "before")
	p.Reset()
	if _, err := roundTrip(old, "x", 5*time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("round trip on a reset connection = %v, want ECONNRESET", err)
	}
	// A new connection is reset by the time the client uses it (or while
	// it connects).
	if refused, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second); err == nil {
		_, err = roundTrip(refused, "x", 5*time.Second)
		refused.Close()
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("round trip on a connection accepted while resetting = %v, want a reset or EOF", err)
		}
	}

	p.Pass()
	healed := dial(t, p)
	wantEcho(t, healed, "after")
}

func TestCloseEndsEveryConnection(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	passing := dial(t, p)
	wantEcho(t, passing, "x")
	p.Blackhole()
	held := dial(t, p)
	wantTimeout(t, held)

	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	for _, c := range []net.Conn{passing, held} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read after Close = %v, want the connection closed", err)
		}
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("dial after Close succeeded, want refused")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestDelayHoldsRepliesNotRequests: while delaying, the target gets the
// request at once (it answers it) and the client gets the answer only
// after the delay, in order; after Pass, new answers come at once.
func TestDelayHoldsRepliesNotRequests(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	wantEcho(t, c, "before")
	p.Delay(3 * time.Second)
	if got, want := p.Mode(), ModeDelay; got != want {
		t.Errorf("Mode() = %v, want %v", got, want)
	}
	if _, err := roundTrip(c, "late", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("round trip while delaying = %v, want a timeout", err)
	}
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := r.ReadString('\n')
	if err != nil || got != "late\n" {
		t.Fatalf("delayed answer = %q, %v; want %q", got, err, "late\n")
	}
	c.SetReadDeadline(time.Time{})
	p.Pass()
	wantEcho(t, c, "after")
}

// TestDelayAfterDelaysFromTheMarker: requests before the marked one are
// answered at once; the marked one's answer comes late.
func TestDelayAfterDelaysFromTheMarker(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	p.DelayAfter("COMMIT", 3*time.Second)
	wantEcho(t, c, "BEGIN")
	if _, err := roundTrip(c, "COMMIT", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("round trip of the marked request = %v, want a timeout", err)
	}
	if got, want := p.Mode(), ModeDelay; got != want {
		t.Errorf("Mode() after the marker = %v, want %v", got, want)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "COMMIT\n" {
		t.Fatalf("delayed answer = %q, %v; want %q", got, err, "COMMIT\n")
	}
}
