package kubernetes

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"

	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leaderrun/leaderrun/lease"
)

func init() {
	lease.RegisterStore(func(ctx context.Context, dsn string, _ lease.OpenOptions) (*Store, error) {
		return Open(ctx, dsn)
	}, "k8s")
}

// Verbs is what leaderrun does with Leases in its namespace, and so what
// its Role must grant. It never deletes a Lease.
var Verbs = []string{"get", "list", "watch", "create", "update"}

// config is a parsed DSN.
type config struct {
	namespace  string // empty: the kubeconfig context's, or the pod's
	kubeconfig string // empty: $KUBECONFIG, ~/.kube/config, or in-cluster
	context    string
}

// parseDSN parses k8s://NAMESPACE[?kubeconfig=PATH&context=NAME]. A DSN
// with user information is not echoed: it may hold a password.
func parseDSN(dsn string) (config, error) {
	var c config
	u, err := url.Parse(dsn)
	if err == nil && u.User != nil {
		return c, fmt.Errorf("DSN k8s://…@…: user information is not taken (it is not shown, as it may hold a password): credentials come from the kubeconfig or the pod's service account")
	}
	if err != nil || u.Scheme != "k8s" || u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return c, fmt.Errorf("DSN %q: want k8s://NAMESPACE[?kubeconfig=PATH&context=NAME]", dsn)
	}
	c.namespace = u.Host
	if c.namespace != "" {
		if errs := validation.IsDNS1123Label(c.namespace); len(errs) > 0 {
			return c, fmt.Errorf("DSN %q: namespace %q: %s", dsn, c.namespace, strings.Join(errs, "; "))
		}
	}
	for k, v := range u.Query() {
		if len(v) != 1 {
			return c, fmt.Errorf("DSN %q: parameter %q given %d times", dsn, k, len(v))
		}
		switch k {
		case "kubeconfig":
			c.kubeconfig = v[0]
		case "context":
			c.context = v[0]
		default:
			return c, fmt.Errorf("DSN %q: unknown parameter %q (known: kubeconfig, context)", dsn, k)
		}
	}
	return c, nil
}

// Open connects to the API server that dsn's configuration names:
//
//	k8s://NAMESPACE[?kubeconfig=PATH&context=NAME]
//
// Without kubeconfig, the configuration is kubectl's ($KUBECONFIG, then
// ~/.kube/config), and in a pod without either, the pod's service account.
// Without NAMESPACE (k8s://), the context's namespace or the pod's is used.
// Open reads the server's clock (see serverClock) and asks the server
// whether the user may do what leaderrun does with Leases (Verbs). A
// malformed DSN, a kubeconfig that cannot be read, refused credentials and
// a missing permission are errors that wrap lease.ErrRefused; an
// unreachable server is a plain error, which a retry may fix.
func Open(ctx context.Context, dsn string) (*Store, error) {
	conn, err := Config(dsn)
	if err != nil {
		return nil, fmt.Errorf("open kubernetes store: %w", err)
	}
	cfg, namespace, creds := conn.REST, conn.Namespace, conn.creds
	// Client-side limits far above what leaderrun sends (a few requests
	// per lease duration), but for Open's calibration.
	cfg.QPS, cfg.Burst = 100, 200
	clock := clockFor(cfg.Host)
	cfg.Wrap(clock.wrap)
	client, err := newClients(cfg)
	if err != nil {
		return nil, errorPolicy(namespace).Wrap("open kubernetes store "+dsn, lease.Refused(err), creds.list())
	}
	s := newStore(client, namespace, clock, fmt.Sprintf("k8s://%s (%s)", namespace, redactHost(cfg.Host)))
	s.creds = creds
	if err := clock.calibrate(ctx, client.coord); err != nil {
		return nil, s.apiError("open kubernetes store "+s.describe, err)
	}
	if err := s.checkAccess(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Connection is how to reach the API server that a k8s:// DSN names.
type Connection struct {
	// REST is the client configuration. Its transport records the
	// credential of every request sent with it, for Scrub.
	REST *rest.Config
	// Namespace is the DSN's, else the context's or the pod's.
	Namespace string
	creds     *credentials
}

// Scrub returns msg without any secret of the configuration (the
// kubeconfig's, the token file's) or any credential a request sent with
// it carried: an error's text, which may quote what a server or a proxy
// echoed.
func (c *Connection) Scrub(msg string) string { return lease.Scrub(msg, c.creds.list()) }

// Config returns the connection to the API server that dsn
// (k8s://NAMESPACE[?kubeconfig=PATH&context=NAME]) names, as Open makes
// it: the DSN's kubeconfig and context, else kubectl's ($KUBECONFIG, then
// ~/.kube/config), else the pod's service account, each kubeconfig
// checked before anything in it runs (checkKubeconfigs); the namespace is
// the DSN's, else the context's or the pod's. Its errors wrap
// lease.ErrRefused and hold no secret. Whatever else of leaderrun talks to
// the API server (package podlabel) connects here, with the same checks.
func Config(dsn string) (*Connection, error) {
	c, err := parseDSN(dsn)
	if err != nil {
		return nil, lease.Refused(err)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.kubeconfig != "" {
		if _, err := os.Stat(c.kubeconfig); err != nil {
			return nil, lease.Refused(fmt.Errorf("kubeconfig: %w", err))
		}
		rules.ExplicitPath = c.kubeconfig
	}
	if err := checkKubeconfigs(rules); err != nil {
		return nil, lease.Refused(fmt.Errorf("%s: %w", dsn, err))
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
	creds := &credentials{}
	if raw, err := loader.RawConfig(); err == nil {
		creds.fromKubeconfig(raw)
	}
	refuse := func(err error) error {
		return errorPolicy(c.namespace).Wrap(dsn, lease.Refused(err), creds.list())
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, refuse(fmt.Errorf("no usable configuration (give ?kubeconfig=PATH, set KUBECONFIG, or run in a pod with a service account): %w", err))
	}
	creds.fromConfig(cfg)
	if c.namespace == "" {
		if c.namespace, _, err = loader.Namespace(); err != nil {
			return nil, refuse(fmt.Errorf("namespace: %w", err))
		}
	}
	cfg.UserAgent = "leaderrun"
	cfg.Wrap(creds.wrap)
	return &Connection{REST: cfg, Namespace: c.namespace, creds: creds}, nil
}

func newStore(client clients, namespace string, clock *serverClock, describe string) *Store {
	return &Store{
		describe:  describe,
		namespace: namespace,
		client:    client,
		clock:     clock,
		written:   map[string]*writtenLease{},
		observed:  map[string]observation{},
		changed:   map[string]chan struct{}{},
		closed:    make(chan struct{}),
		stop:      make(chan struct{}),
	}
}

// redactHost is the server's URL without anything but scheme, host and
// path.
func redactHost(host string) string {
	u, err := url.Parse(host)
	if err != nil {
		return "server"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// checkAccess asks the server whether the user may use Leases as leaderrun
// does, and refuses naming every verb it may not. Where the server does
// not answer the question (it refuses SelfSubjectAccessReviews), the first
// real request tells.
func (s *Store) checkAccess(ctx context.Context) error {
	var (
		mu      sync.Mutex
		missing []string
		failed  error
		wg      sync.WaitGroup
	)
	for _, verb := range Verbs {
		wg.Go(func() {
			review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authzv1.ResourceAttributes{
					Namespace: s.namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases",
				},
			}}
			got, err := s.client.reviewAccess(ctx, review)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed = err
			case !got.Status.Allowed:
				missing = append(missing, verb)
			}
		})
	}
	wg.Wait()
	if len(missing) > 0 {
		ordered := make([]string, 0, len(missing))
		for _, v := range Verbs {
			for _, m := range missing {
				if v == m {
					ordered = append(ordered, v)
				}
			}
		}
		return lease.Refused(fmt.Errorf("open kubernetes store %s: the user may not %s leases (coordination.k8s.io) in namespace %q: "+
			"leaderrun needs a Role with verbs %s on leases there, bound to its service account (see packaging/kubernetes/rbac.yaml)",
			s.describe, strings.Join(ordered, ", "), s.namespace, strings.Join(Verbs, ", ")))
	}
	if failed != nil && !isForbidden(failed) {
		// Refused, or unreachable since calibration: a plain error,
		// retried.
		return s.apiError("open kubernetes store "+s.describe, failed)
	}
	return nil
}
