package kubernetes

import (
	"context"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/leaderrun/leaderrun/lease"
)

// The store's clock is the API server's. Kubernetes sets no server time on
// a Lease (renewTime is whatever the writer sends), so every handle keeps
// an estimate of the server's clock from the Date header of each response:
// the server wrote Date, truncated to the second, between the moment the
// request was sent and the moment its response arrived. Each response thus
// bounds the offset between the server's clock and the local one from
// both sides; the bounds of all responses intersect. Open polls the
// server until its Date changes, which narrows the interval to about one
// round trip.
//
// Decisions use the side of the interval that is safe: a holder writes the
// latest time the server's clock may read (renewTime is never earlier than
// the server's time when the request was sent), judges its own lease over
// at the earliest, and a follower judges another's lease over at the
// latest.

// driftRate widens the interval as it ages, for clocks that run at rates a
// little apart.
const driftRate = 200e-6

// serverClock is the estimate of one API server's clock. It is shared by
// the handles of a process that talk to the same server.
type serverClock struct {
	mu    sync.Mutex    // guards everything below
	valid bool          // a response with a Date header was seen
	lo    time.Duration // server Unix time − local boot clock, lower bound
	hi    time.Duration // upper bound
	at    time.Duration // local boot clock when lo and hi were last narrowed
	// virtual, set by tests only, is the server's clock, exactly.
	virtual func() time.Time
}

var (
	clocksMu sync.Mutex // guards clocks
	clocks   = map[string]*serverClock{}
)

// clockFor returns the process's clock estimate for the server at host.
func clockFor(host string) *serverClock {
	clocksMu.Lock()
	defer clocksMu.Unlock()
	c := clocks[host]
	if c == nil {
		c = &serverClock{}
		clocks[host] = c
	}
	return c
}

// observe narrows the estimate with a response whose Date header read
// date, to a request sent at send and answered at recv (local boot clock).
func (c *serverClock) observe(send, recv time.Duration, date time.Time) {
	d := time.Duration(date.UnixNano())
	lo, hi := d-recv, d+time.Second-send
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid {
		grow := time.Duration(float64(recv-c.at) * driftRate)
		clo, chi := c.lo-grow, c.hi+grow
		if max(lo, clo) <= min(hi, chi) {
			lo, hi = max(lo, clo), min(hi, chi)
		}
		// Otherwise the server's clock was stepped: start again.
	}
	c.valid, c.lo, c.hi, c.at = true, lo, hi, recv
}

// bounds returns the earliest and the latest the server's clock may read
// now. Before any response it reads the local wall clock.
func (c *serverClock) bounds() (lo, hi time.Time) {
	if c.virtual != nil {
		t := c.virtual()
		return t, t
	}
	now := lease.BootClock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.valid {
		t := time.Now()
		return t, t
	}
	grow := time.Duration(float64(now-c.at) * driftRate)
	return time.Unix(0, int64(now+c.lo-grow)), time.Unix(0, int64(now+c.hi+grow))
}

// width is how uncertain the estimate is; a day before any response.
func (c *serverClock) width() time.Duration {
	lo, hi := c.bounds()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.valid {
		return 24 * time.Hour
	}
	return hi.Sub(lo)
}

// wrap records the Date header of every response that passes rt.
func (c *serverClock) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		send := lease.BootClock()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		recv := lease.BootClock()
		if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			c.observe(send, recv, date)
		}
		return resp, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Calibration polls /version until the estimate is narrower than
// calibrated, for at most calibrateFor (the server's Date changes once a
// second), calibrateGap apart.
const (
	calibrated   = 40 * time.Millisecond
	calibrateFor = 1500 * time.Millisecond
	calibrateGap = 10 * time.Millisecond
)

// calibrate narrows c by reading the server's /version until its Date
// changes. It returns the first error of a request, which tells whether
// the server can be reached at all.
func (c *serverClock) calibrate(ctx context.Context, client rest.Interface) error {
	deadline := time.Now().Add(calibrateFor)
	for first := true; first || (c.width() > calibrated && time.Now().Before(deadline)); first = false {
		if err := client.Get().AbsPath("/version").Do(ctx).Error(); err != nil {
			return err
		}
		if c.width() > calibrated {
			select {
			case <-time.After(calibrateGap):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}
