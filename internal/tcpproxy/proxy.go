// Package tcpproxy is a TCP proxy for tests that can pass, reset or
// blackhole the connections it carries, to simulate a store that crashed or
// a network that was partitioned.
package tcpproxy

import (
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
)

func (m Mode) String() string {
	switch m {
	case ModePass:
		return "pass"
	case ModeReset:
		return "reset"
	case ModeBlackhole:
		return "blackhole"
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

	mu     sync.Mutex // guards the fields below
	mode   Mode
	links  map[*link]struct{}
	closed bool
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
	p := &Proxy{target: target, ln: ln, links: map[*link]struct{}{}}
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

// Reset closes every current connection with a TCP reset (SO_LINGER 0) on
// both sides, and resets every connection accepted until the mode changes.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.mode = ModeReset
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
	p.mode = m
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
	if mode == ModePass {
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
		p.relay(l.upstream, l.client)
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

// relay copies src to dst while the proxy passes and discards what src
// sends otherwise. It returns when src fails or ends; dst may be nil.
func (p *Proxy) relay(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && p.Mode() == ModePass {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
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
