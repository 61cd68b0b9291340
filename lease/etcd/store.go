package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leaderrun/leaderrun/internal/tcpdial"
	"github.com/leaderrun/leaderrun/lease"
)

func init() {
	// etcd stores nothing until the first write, so an Existing open
	// differs in nothing.
	lease.RegisterStore(func(ctx context.Context, dsn string, _ lease.OpenOptions) (*Store, error) {
		return Open(ctx, dsn)
	}, "etcd", "etcds")
}

// Client timing. gRPC pings an idle connection every keepAliveTime and drops
// it when the answer takes longer than keepAliveTimeout (etcd refuses pings
// more often than every 5 s); the TCP dialer adds keepalive and
// TCP_USER_TIMEOUT below that. openTimeout bounds Open's first contact.
const (
	dialTimeout      = 5 * time.Second
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 5 * time.Second
	openTimeout      = 10 * time.Second
)

// Store is a lease.Store in an etcd cluster. Its methods are safe for
// concurrent use.
type Store struct {
	describe string
	secrets  []string // scrubbed from every error's text
	prefix   string
	client   *clientv3.Client
	leases   leases
	seen     seen

	// revoking counts the clean-up revocations in flight, which Close
	// waits for; revokeMu orders their start before Close's wait.
	revokeMu sync.Mutex
	revoking sync.WaitGroup

	closeOnce sync.Once
	closed    chan struct{}

	passwordEnv string // the variable the password came from, if any

	// waiting, when set (by tests), runs in Wait and WaitGroup once etcd
	// confirmed their watch and their read found no change: from then on
	// only an event wakes them.
	waiting func()
}

var _ lease.Store = (*Store)(nil)

// maxReply bounds one reply from the server: the client's default is
// 2 GiB, which it would allocate for one reply of a broken or hostile
// server. No reply of leaderrun's comes near 64 MiB. (A variable, for a
// test.)
var maxReply = 64 << 20

// Open connects to the etcd cluster that dsn names and checks that the user
// may read and write the store's keys. The DSN is
//
//	etcd://[user[:password]@]host[:port][,host[:port]…][/prefix][?param=value&…]
//
// or etcds://… for TLS; see the package documentation for the parameters.
// A malformed DSN, a refused user or password, and a role without
// permission on the prefix are errors that wrap lease.ErrRefused; an
// unreachable cluster is a plain error, which a retry may fix. No error
// contains the password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := parseDSN(dsn)
	secrets := secrets(dsn, cfg)
	fail := func(err error) (*Store, error) {
		return nil, wrapError("open etcd store "+redact(dsn), err, secrets)
	}
	if err != nil && cfg.fromURL {
		// Where the password ends is uncertain in a DSN that does not
		// parse: quote none of it.
		return nil, lease.Refused(fmt.Errorf("open etcd store %s://%s@…: malformed DSN (nothing of it is shown, as it has a password: check the hosts, the prefix and the parameters, and write '@', ':' and '/' in the password as %%40, %%3A and %%2F)",
			cfg.scheme(), cfg.user))
	}
	if err != nil {
		return fail(lease.Refused(err))
	}
	if err := cfg.loadPassword(); err != nil {
		return fail(lease.Refused(err))
	}
	secrets = append(secrets, cfg.password)
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return fail(lease.Refused(err))
	}
	dialer := tcpdial.New()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.endpoints,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		TLS:                  tlsCfg,
		Username:             cfg.user,
		Password:             cfg.password,
		Logger:               zap.NewNop(),
		MaxCallRecvMsgSize:   maxReply,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		})},
	})
	if err != nil {
		return fail(err)
	}
	s := &Store{
		describe: cfg.describe(),
		secrets:  secrets,
		prefix:   cfg.prefix,
		client:   client,
		closed:   make(chan struct{}),

		passwordEnv: cfg.params[paramPasswordEnv],
	}
	if err := s.checkAccess(ctx, tlsCfg, cfg.hosts); err != nil {
		s.Close()
		return fail(err)
	}
	return s, nil
}

// checkAccess reads the store's keys and asks etcd to authorize a write to
// them, in one transaction whose condition never holds, so that it writes
// nothing: etcd checks the permissions of both branches before it
// evaluates the condition. With TLS, a probe of the certificates runs
// alongside (diagnoseTLS), so that a certificate problem, which gRPC
// reports only as a timeout, fails Open at once and says what it is.
func (s *Store) checkAccess(ctx context.Context, tlsCfg *tls.Config, hosts []string) error {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	access := make(chan error, 1)
	go func() {
		probe := s.prefix + "/n/"
		_, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.Version(probe), "<", 0)).
			Then(clientv3.OpPut(probe, "")).
			Else(clientv3.OpGet(probe, clientv3.WithPrefix(), clientv3.WithCountOnly())).
			Commit()
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer from %s within %v: %w", strings.Join(hosts, ", "), openTimeout, err)
		}
		access <- err
	}()
	// gRPC says only "context deadline exceeded", after openTimeout, both
	// for endpoints that cannot be reached and for certificates that do
	// not verify: look for either at once, alongside.
	diagnosis := make(chan error, 1)
	go func() {
		if err := unreachable(ctx, hosts); err != nil {
			diagnosis <- err
			return
		}
		if tlsCfg != nil {
			if err := diagnoseTLS(ctx, tlsCfg, hosts); err != nil {
				diagnosis <- lease.Refused(err)
				return
			}
		}
		diagnosis <- nil
	}()
	select {
	case err := <-access:
		cancel()
		if derr := <-diagnosis; err != nil && derr != nil {
			return derr
		}
		return err
	case derr := <-diagnosis:
		if derr != nil {
			cancel()
			<-access
			return derr
		}
		return <-access
	}
}

// unreachable dials every host at once and returns an error that names
// each one's failure when none accepts a TCP connection, else nil. It is
// not a refusal: the cluster may come up.
func unreachable(ctx context.Context, hosts []string) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, addr := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			conn, err := tcpdial.New().DialContext(dctx, "tcp", addr)
			if err != nil {
				errs[i] = err
				return
			}
			conn.Close()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil // Open's own error says why
	}
	// Each host's error is wrapped, so that a caller can tell, say, a
	// host name that does not resolve (*net.DNSError).
	verbs := strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; ")
	return fmt.Errorf("no etcd endpoint reachable: "+verbs, anySlice(errs)...)
}

// Describe returns the DSN without its password and parameters.
func (s *Store) Describe() string { return s.describe }

// Close closes the store's connections; calls in flight fail and Waits
// return lease.ErrClosed. It does not release leases (they expire, and so
// do the tenures attached to them) and is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.revokeMu.Lock()
		close(s.closed)
		s.revokeMu.Unlock()
		if spare := s.leases.dropSpare(); spare != nil {
			s.revoke(spare.id)
		}
		s.revoking.Wait()
		s.client.Close()
	})
	return nil
}

// wrap adds op as context to err (see wrapError); after Close, every error
// is lease.ErrClosed.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if lease.IfClosed(s.closed) != nil {
		return fmt.Errorf("%s: %w", op, lease.ErrClosed)
	}
	return wrapError(op, err, s.secrets)
}

// errTTL is returned for a lease duration that is not positive.
var errTTL = errors.New("lease duration must be positive")

// CredentialEnv implements lease.Credentialed: the variable password_env
// names, if any.
func (s *Store) CredentialEnv() []string {
	if s.passwordEnv == "" {
		return nil
	}
	return []string{s.passwordEnv}
}

func anySlice(errs []error) []any {
	out := make([]any, len(errs))
	for i, err := range errs {
		out[i] = err
	}
	return out
}
