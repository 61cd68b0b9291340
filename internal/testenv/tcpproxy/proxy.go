// Package tcpproxy is a TCP proxy for tests that can pass, reset, blackhole
// or delay the connections it carries, to simulate a store that crashed, a
// network that was partitioned, or a reply that came too late.
package tcpproxy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does with connections and the bytes they carry.
type Mode int

const (
	// ModePass forwards bytes both ways.
	ModePass Mode = iota
	// ModeReset aborts every connection with a TCP reset and refuses new ones.
	ModeReset
	// ModeBlackhole keeps connections open and silently drops every byte
	// both ways, also on connections accepted while blackholed.
	ModeBlackhole
	// ModeDelay forwards what the client sends at once and what the
	// target answers only after a delay (Delay).
	ModeDelay
)

func (m Mode) String() string {
	switch m {
	case ModePass:
		return "pass"
	case ModeReset:
		return "reset"
	case ModeBlackhole:
		return "blackhole"
	case ModeDelay:
		return "delay"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// dialTimeout bounds the connection to the target for one accepted client.
const dialTimeout = 5 * time.Second

// Proxy listens on a loopback port and relays each accepted connection to
// its target. Its methods are safe for concurrent use. Close ends every
// goroutine the proxy started.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // counts the accept loop and every relay goroutine

	mu    sync.Mutex // guards the fields below
	mode  Mode
	delay time.Duration // how long ModeDelay holds each reply
	// marker, when set in ModePass, is what a client's write must contain
	// to switch the proxy to ModeDelay (DelayAfter).
	marker []byte
	links  map[*link]struct{}
	closed bool
	done   chan struct{} // closed by Close, to end delays in progress
}

// link is one client connection and, when the proxy could reach the target
// at accept time in ModePass, its upstream connection.
type link struct {
	client   net.Conn
	upstream net.Conn // nil for a connection accepted while not passing
}

// New starts a proxy to target (host:port) listening on 127.0.0.1 at a port
// the kernel picks. It starts in ModePass.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, links: map[*link]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode reports the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Pass resumes forwarding. Connections accepted while the proxy was not
// passing stay dead; clients notice by their own timeouts.
func (p *Proxy) Pass() { p.setMode(ModePass) }

// Blackhole drops every byte both ways from now on, without closing any
// connection. A client's close is still relayed to the target, so that
// nothing outlives the test.
func (p *Proxy) Blackhole() { p.setMode(ModeBlackhole) }

// Delay holds every byte the target sends, on current connections and new
// ones, for d before the client gets it, in order; what the client sends
// goes through at once. A request thus reaches the target and is carried
// out while its reply arrives late: past the client's timeout, if d is
// longer. Bytes read while delaying keep their delay after the mode
// changes.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay, p.marker = ModeDelay, d, nil
}

// DelayAfter passes until a client writes marker (within one read of the
// proxy's), and from that write on delays as Delay(d) does: the reply to
// that request, and every later one, comes d late. It picks out one
// request of a client that makes several, by a string of its own (a
// statement, an argument), so that the earlier ones are answered in time.
// Any other mode set meanwhile disarms it.
func (p *Proxy) DelayAfter(marker string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay, p.marker = ModePass, d, []byte(marker)
}

// Reset closes every current connection with a TCP reset (SO_LINGER 0) on
// both sides, and resets every connection accepted until the mode changes.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.mode, p.marker = ModeReset, nil
	links := p.takeLinksLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.abort()
	}
}

// Close stops listening, resets every connection and waits for every
// goroutine of the proxy to end. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	links := p.takeLinksLocked()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.abort()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (p *Proxy) setMode(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.marker = m, nil
}

// forwarding reports whether what a client wrote, b, goes on to the
// target, after switching to ModeDelay if b has the marker DelayAfter set.
func (p *Proxy) forwarding(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == ModePass && p.marker != nil && bytes.Contains(b, p.marker) {
		p.mode, p.marker = ModeDelay, nil
	}
	return p.mode == ModePass || p.mode == ModeDelay
}

func (p *Proxy) takeLinksLocked() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	clear(p.links)
	return links
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // the listener was closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve sets up one accepted connection and relays it until either side
// closes or the proxy aborts it.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	l := &link{client: client}
	mode := p.Mode()
	if mode == ModeReset {
		l.abort()
		return
	}
	if mode == ModePass || mode == ModeDelay {
		up, err := net.DialTimeout("tcp", p.target, dialTimeout)
		if err != nil {
			l.abort()
			return
		}
		l.upstream = up
	}
	if !p.register(l) {
		l.abort()
		return
	}
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		p.relay(l.client, l.upstream)
		l.close()
	}()
	if l.upstream != nil {
		p.relayReplies(l.upstream, l.client)
		l.close()
	}
	done.Wait()
	p.unregister(l)
}

// register adds l to the live links, unless the proxy was closed or reset
// meanwhile.
func (p *Proxy) register(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == ModeReset {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) unregister(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// relay copies what the client sends (src) to the target (dst) while the
// proxy passes or delays, and discards it otherwise. It returns when src
// fails or ends; dst may be nil.
func (p *Proxy) relay(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && p.forwarding(buf[:n]) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// chunk is bytes the target sent, to be forwarded at due.
type chunk struct {
	data []byte
	due  time.Time
}

// relayReplies copies what the target sends (src) to the client (dst) as
// relay does, and holds each read for the delay when the proxy delays. A
// reader goroutine stamps each read as it comes, so that delays do not add
// up. It returns when src fails or ends, or dst fails.
func (p *Proxy) relayReplies(src, dst net.Conn) {
	chunks := make(chan chunk, 64)
	stop := make(chan struct{})
	defer close(stop)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				mode, due := p.mode, time.Now()
				if mode == ModeDelay {
					due = due.Add(p.delay)
				}
				p.mu.Unlock()
				if mode == ModePass || mode == ModeDelay {
					select {
					case chunks <- chunk{buf[:n], due}:
					case <-stop:
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.done:
				t.Stop()
				return
			}
		}
		if mode := p.Mode(); mode != ModePass && mode != ModeDelay {
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
	}
}

// close closes both sides normally; it is safe to call more than once.
func (l *link) close() {
	l.client.Close()
	if l.upstream != nil {
		l.upstream.Close()
	}
}

// abort closes both sides with a TCP reset.
func (l *link) abort() {
	for _, c := range []net.Conn{l.client, l.upstream} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		if c != nil {
			c.Close()
		}
	}
}
