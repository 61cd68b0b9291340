package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// shutdownTimeout bounds how long Serve waits for requests in flight once
// its context ends.
const shutdownTimeout = 5 * time.Second

// Limits of the HTTP server, so that idle or slow clients cannot use up
// leaderrun's file descriptors (and with them, the next child's fork).
var (
	maxConns    = 64               // connections served at once; more wait in the kernel's backlog
	idleTimeout = 30 * time.Second // an idle keep-alive connection is closed after this
	ioTimeout   = 10 * time.Second // reading a request, writing a response
)

// Handler serves the Observer's routes:
//
//	GET /healthz  200 "ok" when Healthy, else 503 and a one-line reason
//	GET /leader   200 when leading, 503 on standby; JSON
//	              {"name":…,"holder":…,"leading":…,"token":…} (token 0 on standby)
//	GET /metrics  the Observer's registry in Prometheus formats
//
// Once Partitioned, GET /partitions (200, JSON: the replica's view of the
// partitions) takes the place of /leader, which answers 404 with a line
// that points to /partitions. HEAD works wherever GET does;
// other methods get 405.
func (o *Observer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", o.serveHealthz)
	o.mu.Lock()
	view := o.partView
	o.mu.Unlock()
	if view != nil {
		mux.HandleFunc("GET /partitions", func(w http.ResponseWriter, _ *http.Request) { serveJSON(w, http.StatusOK, view()) })
		mux.HandleFunc("GET /leader", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "404 this replica runs with --partitions: each partition has its own leader, see /partitions", http.StatusNotFound)
		})
	} else {
		mux.HandleFunc("GET /leader", o.serveLeader)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}))
	return mux
}

func (o *Observer) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if why := o.unhealthy(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, why)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (o *Observer) serveLeader(w http.ResponseWriter, _ *http.Request) {
	st := o.state()
	code := http.StatusOK
	if !st.Leading {
		code = http.StatusServiceUnavailable
	}
	serveJSON(w, code, st)
}

// serveJSON writes v as JSON with status code.
func serveJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // cannot happen: the values have only plain fields
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}

// Serve serves Handler on l until ctx ends, then shuts down gracefully,
// giving requests in flight up to 5 seconds, and returns nil. It closes l.
// It returns an error only if serving fails before ctx ends.
func (o *Observer) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           o.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       ioTimeout,
		WriteTimeout:      ioTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          o.errorLog,
	}
	ll := limitListener(l, maxConns)
	srv.ConnState = ll.track
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ll) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve http on %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-served // http.ErrServerClosed
	return nil
}

// Listen listens on TCP address addr (the --http-addr option). Its error
// names the option and the address and wraps the cause, for example
// "--http-addr 127.0.0.1:8080: address already in use" (errors.Is
// syscall.EADDRINUSE).
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		cause := err
		var op *net.OpError
		if errors.As(err, &op) {
			cause = op.Err
			var sys *os.SyscallError
			if errors.As(cause, &sys) {
				cause = sys.Err
			}
		}
		return nil, fmt.Errorf("--http-addr %s: %w", addr, cause)
	}
	return l, nil
}

// limitListener accepts at most n connections at a time. When all n are
// taken, Accept first closes the connection that has been quiet longest:
// kept alive without a request in flight, or connected without sending a
// byte for newGrace. So idle clients never keep a health probe out; only
// when every connection is busy does Accept wait until one is closed.
func limitListener(l net.Listener, n int) *limited {
	return &limited{Listener: l, slots: make(chan struct{}, n), quiet: make(map[*limitedConn]quiet)}
}

// newGrace is how long a new connection may stay silent before it counts
// as quiet: a client sends its request as soon as it has connected.
var newGrace = 250 * time.Millisecond

type limited struct {
	net.Listener
	slots chan struct{}

	mu    sync.Mutex
	quiet map[*limitedConn]quiet // connections without a request in flight
}

type quiet struct {
	since time.Time
	new   bool // connected, nothing read yet
}

func (l *limited) Accept() (net.Conn, error) {
	for taken := false; !taken; {
		select {
		case l.slots <- struct{}{}:
			taken = true
		default:
			if !l.closeQuietest() {
				// Every connection is busy: wait for one to end, looking
				// again for a quiet one now and then.
				select {
				case l.slots <- struct{}{}:
					taken = true
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// track is the server's ConnState hook: it keeps the set of quiet
// connections.
func (l *limited) track(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateNew, http.StateIdle:
		l.quiet[lc] = quiet{since: time.Now(), new: state == http.StateNew}
	default:
		delete(l.quiet, lc)
	}
}

// closeQuietest closes the connection quiet for longest, and reports
// whether there was one. Its slot is free once Close returns.
func (l *limited) closeQuietest() bool {
	l.mu.Lock()
	var (
		oldest *limitedConn
		since  time.Time
	)
	for c, q := range l.quiet {
		if q.new && time.Since(q.since) < newGrace {
			continue
		}
		if oldest == nil || q.since.Before(since) {
			oldest, since = c, q.since
		}
	}
	delete(l.quiet, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
