package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/leaderrun/leaderrun/internal/tcpdial"
	"github.com/leaderrun/leaderrun/lease"
)

func init() {
	// Redis stores nothing until the first write, so an Existing open
	// differs in nothing.
	lease.RegisterStore(func(ctx context.Context, dsn string, _ lease.OpenOptions) (*Store, error) {
		return Open(ctx, dsn)
	}, "redis", "rediss")
	// go-redis logs to stderr on its own (failed dials, pool events);
	// leaderrun reports what matters through the errors it returns.
	goredis.SetLogger(discardLogger{})
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// defaultClientName is the CLIENT SETNAME of leaderrun's connections unless
// the DSN sets client_name.
const defaultClientName = "leaderrun"

// defaultDialTimeout bounds a connection attempt unless the DSN sets
// dial_timeout.
const defaultDialTimeout = 5 * time.Second

// defaultWaitTimeout bounds WAIT when the caller's context has no deadline.
const defaultWaitTimeout = time.Second

// Store is a lease.Store in a Redis server. Every operation is one Lua
// script, timed by the server's clock. Its methods are safe for concurrent
// use.
type Store struct {
	describe     string
	secrets      []string // scrubbed from every error's text
	keys         keys
	channel      string // the wake-up channel of the prefix
	waitReplicas int
	client       *goredis.Client
	scripts      scripts
	sub          *subscriber

	closeOnce sync.Once
	closed    chan struct{}
}

var _ lease.Store = (*Store)(nil)

// Open connects to the Redis server that dsn names and checks that it can
// hold leases: a primary, not a replica, whose eviction policy cannot
// evict a lease record.
//
// dsn is a redis:// or rediss:// (TLS) URL as go-redis's ParseURL reads it
// (redis://[user:password@]host:port/db plus its query parameters, such as
// dial_timeout or skip_verify), and leaderrun's own parameters:
//
//   - leaderrun_prefix=P starts every key with "P:" and names the wake-up
//     channel "P:wake" (default "leaderrun").
//   - leaderrun_wait_replicas=N makes every grant and renewal wait until N
//     replicas acknowledged it (WAIT), and fail otherwise.
//
// A malformed DSN, a parameter given twice, an unknown leaderrun_
// parameter, refused credentials, a missing ACL permission, an unknown
// database number, a read-only replica and an eviction policy that may
// evict leases (allkeys-*) are errors that wrap lease.ErrRefused; an
// unreachable server is a plain error, which a retry may fix. No error
// contains the password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	secrets := dsnSecrets(dsn)
	fail := func(err error) (*Store, error) {
		return nil, wrapError("open redis store "+redact(dsn), err, secrets)
	}
	rest, opts, err := splitDSN(dsn)
	if err != nil {
		return fail(lease.Refused(err))
	}
	cfg, err := goredis.ParseURL(rest)
	if err != nil {
		return fail(lease.Refused(err))
	}
	configure(cfg, opts)
	s := &Store{
		describe:     redact(dsn),
		secrets:      secrets,
		keys:         keys{prefix: opts.prefix + ":"},
		channel:      opts.prefix + ":wake",
		waitReplicas: opts.waitReplicas,
		client:       goredis.NewClient(cfg),
		scripts:      loadScripts(nil),
		closed:       make(chan struct{}),
	}
	s.sub = newSubscriber(s.client, s.channel)
	if err := s.checkServer(ctx); err != nil {
		s.Close()
		return fail(err)
	}
	return s, nil
}

// configure sets what leaderrun needs on top of the DSN: the keepalive
// dialer (with TLS for rediss://), context deadlines on every command, no
// hidden retries (the election retries, knowing what an unknown outcome
// means), and no handshake extras that an older server refuses.
func configure(cfg *goredis.Options, opts options) {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	cfg.Dialer = dialer(cfg.DialTimeout, cfg.TLSConfig)
	cfg.DialerRetries = 1 // the election retries with its own back-off
	cfg.ContextTimeoutEnabled = true
	if !opts.retriesSet {
		cfg.MaxRetries = -1
	}
	if cfg.ClientName == "" {
		cfg.ClientName = defaultClientName
	}
	cfg.DisableIdentity = true
	cfg.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// dialer dials with internal/tcpdial (keepalive, TCP_USER_TIMEOUT) and, when
// tlsConfig is set, negotiates TLS: go-redis only does that itself with its
// own dialer. Replies are read through boundedConn, which refuses sizes
// go-redis would allocate and could not.
func dialer(timeout time.Duration, tlsConfig *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := tcpdial.New()
	d.Timeout = timeout
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tlsConfig == nil {
			return bounded(conn), nil
		}
		tc := tls.Client(conn, tlsConfig)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		return bounded(tc), nil
	}
}

// checkServer reads INFO: a replica is refused (it cannot take writes), and
// so is a memory limit with an allkeys-* eviction policy, which may evict
// a held lease's record and let a second holder in. A server that does not
// let the user run INFO is not checked.
func (s *Store) checkServer(ctx context.Context) error {
	info, err := s.client.Info(ctx).Result() // the default sections; several named ones need Redis 7
	var rerr goredis.Error
	switch {
	case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOPERM"):
		return s.client.Ping(ctx).Err()
	case err != nil:
		return err
	}
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if fields["role"] == "slave" || fields["role"] == "replica" {
		return lease.Refused(errors.New("the server is a read-only replica; point the DSN at the primary"))
	}
	if maxmemory, _ := strconv.ParseInt(fields["maxmemory"], 10, 64); maxmemory > 0 &&
		strings.HasPrefix(fields["maxmemory_policy"], "allkeys-") {
		return lease.Refused(fmt.Errorf("maxmemory-policy %s may evict a held lease and let two holders run: use noeviction or a volatile-* policy",
			fields["maxmemory_policy"]))
	}
	return nil
}

// Describe returns the DSN without its password.
func (s *Store) Describe() string { return s.describe }

// Close stops the subscription and closes the store's connections. Calls
// in flight fail; Waits return lease.ErrClosed. It does not release leases
// and is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.sub.Stop()
		s.client.Close()
	})
	return nil
}

// wrap adds op as context to err; see wrapError.
func (s *Store) wrap(op string, err error) error {
	return wrapError(op, err, s.secrets)
}

// run runs script, failing at once if the store is closed. With
// leaderrun_wait_replicas, a reply whose status is 1 (the script granted or
// renewed) is only returned once that many replicas acknowledged it.
func (s *Store) run(ctx context.Context, script *goredis.Script, durable bool, keys []string, args ...any) ([]any, error) {
	select {
	case <-s.closed:
		return nil, lease.ErrClosed
	default:
	}
	if !durable || s.waitReplicas == 0 {
		return script.Run(ctx, s.client, keys, args...).Slice()
	}
	conn := s.client.Conn()
	defer conn.Close()
	reply, err := script.Run(ctx, conn, keys, args...).Slice()
	if err != nil || len(reply) == 0 || reply[0] != int64(1) {
		return reply, err
	}
	timeout := defaultWaitTimeout
	if d, ok := ctx.Deadline(); ok {
		// Leave WAIT time to answer before the deadline cuts the read.
		left := time.Until(d)
		timeout = left - min(left/4, 100*time.Millisecond)
	}
	if timeout < time.Millisecond {
		return nil, context.DeadlineExceeded
	}
	n, err := conn.Wait(ctx, s.waitReplicas, timeout).Result()
	switch {
	case err != nil:
		return nil, fmt.Errorf("wait for %d replicas: %w", s.waitReplicas, err)
	case n < int64(s.waitReplicas):
		return nil, fmt.Errorf("written, but only %d of %d replicas acknowledged it within %v", n, s.waitReplicas, timeout.Round(time.Millisecond))
	}
	return reply, nil
}

// errTTL is returned for a lease duration that is not positive.
var errTTL = errors.New("lease duration must be positive")
