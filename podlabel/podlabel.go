// Package podlabel puts a label on the pod whose replica runs the command
// (--leader-label KEY=VALUE), so that a Service selecting the label routes
// to the leader alone while every replica is Ready: the label is routing,
// the lease is safety.
//
// The replica that starts the command labels its own pod once the command
// runs (Started), and removes the label once the command and its tree are
// dead, before the name is handed on (Ended): in a graceful hand-off the
// old pod loses the label before the new leader is elected, so at most one
// pod carries it. On taking over, the new leader first removes the label
// from every other pod of its namespace that carries it (a crashed
// leader's, or one that lost its tenure while it could not reach the API
// server), then labels its own. A pod that cannot be labelled (no
// permission, no API server, no such pod) is said once per cause, at
// warning level, and leading goes on; the label is tried again, with a
// growing pause, while the tenure lasts. The removal before the release
// waits for at most removeTimeout: the label never holds up the election.
//
// The pod is POD_NAME in POD_NAMESPACE (the downward API, as
// packaging/kubernetes/deployment.yaml sets them), else the host name in
// the service account's namespace. The API server is reached as the
// Kubernetes store reaches it (lease/kubernetes.Config): the kubeconfig
// and context a k8s:// store's DSN names, else $KUBECONFIG or
// ~/.kube/config, else the pod's service account. The requests are a list
// of the namespace's pods by the label and merge patches of pods'
// labels: the pod's service account needs list and patch on pods.
package podlabel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Label is a label's KEY=VALUE.
type Label struct{ Key, Value string }

func (l Label) String() string { return l.Key + "=" + l.Value }

// Parse reads KEY=VALUE, checked by Kubernetes' own rules for label keys
// (an optional DNS-subdomain prefix and a slash, then a name of up to 63
// characters) and values (up to 63 characters, possibly empty).
func Parse(s string) (Label, error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return Label{}, fmt.Errorf("%q: want KEY=VALUE, as role=leader", s)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return Label{}, fmt.Errorf("%q: the key %q is not a valid label key: %s", s, key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return Label{}, fmt.Errorf("%q: the value %q is not a valid label value: %s", s, value, strings.Join(errs, "; "))
	}
	return Label{key, value}, nil
}

// Pod names a pod.
type Pod struct{ Namespace, Name string }

func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// namespaceFile is where a pod's service account says its namespace.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// findPod names this process's pod: POD_NAME, else the host name (a pod's
// is its name), in POD_NAMESPACE, else the namespace in the service
// account's file, else fallback (the configuration's).
func findPod(getenv func(string) string, hostname func() (string, error), readFile func(string) ([]byte, error), fallback string) (Pod, error) {
	p := Pod{Name: getenv("POD_NAME"), Namespace: getenv("POD_NAMESPACE")}
	if p.Name == "" {
		h, err := hostname()
		if err != nil || h == "" {
			return p, fmt.Errorf("which pod is this? POD_NAME is not set and the host name is unknown (%v): set POD_NAME from the downward API (fieldRef metadata.name)", err)
		}
		p.Name = h
	}
	if p.Namespace == "" {
		if b, err := readFile(namespaceFile); err == nil {
			p.Namespace = strings.TrimSpace(string(b))
		}
	}
	if p.Namespace == "" {
		p.Namespace = fallback
	}
	if p.Namespace == "" {
		return p, errors.New("which namespace is this pod in? POD_NAMESPACE is not set and there is no " + namespaceFile + ": set POD_NAMESPACE from the downward API (fieldRef metadata.namespace)")
	}
	if errs := validation.IsDNS1123Subdomain(p.Name); len(errs) > 0 {
		return p, fmt.Errorf("pod name %q (POD_NAME, else the host name) is not a pod's name: %s", p.Name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(p.Namespace); len(errs) > 0 {
		return p, fmt.Errorf("namespace %q (POD_NAMESPACE, else the service account's) is not a namespace's name: %s", p.Namespace, strings.Join(errs, "; "))
	}
	return p, nil
}

// api is what a Labeler asks of the API server (client.go).
type api interface {
	// setLabel sets the label key of pod to *value, or removes it when
	// value is nil (a JSON merge patch of the pod's labels).
	setLabel(ctx context.Context, pod Pod, key string, value *string) error
	// labelled lists the names of the pods of namespace that carry l.
	labelled(ctx context.Context, namespace string, l Label) ([]string, error)
	// describe says what went wrong with err (a cause, the same for
	// the same kind of failure), and whether it is the server's refusal
	// for want of a permission.
	describe(err error) (cause string, forbidden bool)
}

// errLeftOut is newAPI's error in a build without Kubernetes.
var errLeftOut = errors.New("this build leaves out Kubernetes (-tags nokubernetes); build without that tag")

// Options configure New.
type Options struct {
	Label Label
	// Store is the store's DSN: a k8s:// DSN names the configuration the
	// API server is reached with; with any other store, it is kubectl's,
	// or the pod's service account.
	Store  string
	Logger *slog.Logger
}

// Timing of the label's requests.
const (
	// removeTimeout bounds Ended: the release waits no longer for the
	// label's removal.
	removeTimeout = time.Second
	// requestTimeout bounds the other requests.
	requestTimeout = 10 * time.Second
	// firstRetry is the pause before the first retry of a failed
	// attempt; it doubles up to maxRetry.
	firstRetry = 500 * time.Millisecond
	maxRetry   = 30 * time.Second
)

// Labeler keeps this replica's pod labelled while its command runs.
type Labeler struct {
	api   api
	pod   Pod
	label Label
	log   *slog.Logger

	mu      sync.Mutex
	want    bool               // the command runs: the pod should carry the label
	settled chan struct{}      // closed once the first attempt at want ended; then nil
	cancel  context.CancelFunc // the attempt in flight's
	// maybe: the pod may carry the label because this replica asked
	// for it (since it last removed it).
	maybe  bool
	warned map[string]bool // causes said since the last success

	kick chan struct{} // a new want (capacity 1)
	quit chan struct{}
	done chan struct{}
}

// New finds this process's pod and the API server's configuration, and
// returns the Labeler of that pod. Its errors are configuration errors:
// not in a pod, no configuration to reach the API server with.
func New(opts Options) (*Labeler, error) {
	dsn := opts.Store
	if !strings.HasPrefix(dsn, "k8s:") {
		dsn = "k8s://" // kubectl's configuration, or the pod's service account
	}
	a, namespace, err := newAPI(dsn)
	if errors.Is(err, errLeftOut) {
		return nil, fmt.Errorf("--leader-label: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--leader-label: no way to reach the Kubernetes API server (not in a pod with a service account, and no kubeconfig): %w", err)
	}
	pod, err := findPod(os.Getenv, os.Hostname, os.ReadFile, namespace)
	if err != nil {
		return nil, fmt.Errorf("--leader-label: %w", err)
	}
	log := opts.Logger.With("pod", pod.String(), "label", opts.Label.String())
	return start(a, pod, opts.Label, log), nil
}

func start(a api, pod Pod, l Label, log *slog.Logger) *Labeler {
	lb := &Labeler{api: a, pod: pod, label: l, log: log, warned: map[string]bool{},
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go lb.run()
	return lb
}

// Started says the command runs: the pod is labelled, after the label is
// removed from any other pod. It does not wait.
func (lb *Labeler) Started() { lb.set(true) }

// Ended says the command and its tree are dead: the label is removed
// from the pod. It waits for the removal, for at most removeTimeout; a
// removal that did not succeed is tried again while no command runs.
func (lb *Labeler) Ended() {
	settled := lb.set(false)
	t := time.NewTimer(removeTimeout)
	defer t.Stop()
	select {
	case <-settled:
	case <-t.C:
		lb.log.Warn("could not remove the leader label within its time; handing the name on all the same (the next leader removes it)", "waited", removeTimeout)
	}
}

// Close stops the Labeler's requests.
func (lb *Labeler) Close() {
	close(lb.quit)
	lb.mu.Lock()
	if lb.cancel != nil {
		lb.cancel()
	}
	lb.mu.Unlock()
	<-lb.done
}

// set makes want the pod's wanted state and returns the channel closed
// once the first attempt at it ended.
func (lb *Labeler) set(want bool) <-chan struct{} {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.want = want
	if lb.cancel != nil {
		lb.cancel() // an attempt at the former want
	}
	lb.settled = make(chan struct{})
	select {
	case lb.kick <- struct{}{}:
	default:
	}
	return lb.settled
}

// run applies each want, retrying a failed attempt after a growing pause
// until it succeeds or the want changes.
func (lb *Labeler) run() {
	defer close(lb.done)
	var retry <-chan time.Time
	pause := firstRetry
	for {
		select {
		case <-lb.kick:
			pause = firstRetry
		case <-retry:
		case <-lb.quit:
			return
		}
		retry = nil
		if err := lb.attempt(); err != nil && !errors.Is(err, context.Canceled) {
			lb.log.Debug("the leader label's request failed; trying again", "in", pause, "err", err)
			retry = time.After(pause)
			pause = min(2*pause, maxRetry)
		}
	}
}

// attempt applies the current want once.
func (lb *Labeler) attempt() error {
	lb.mu.Lock()
	want, settled := lb.want, lb.settled
	timeout := requestTimeout
	if !want {
		timeout = removeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	lb.cancel = cancel
	lb.mu.Unlock()
	err := lb.apply(ctx, want)
	cancel()
	lb.mu.Lock()
	if settled != nil && lb.settled == settled { // the want is still this one's
		close(settled)
		lb.settled = nil
	}
	lb.mu.Unlock()
	return err
}

// apply makes the pod carry the label (want), after removing it from every
// other pod, or not carry it.
func (lb *Labeler) apply(ctx context.Context, want bool) error {
	if !want {
		lb.mu.Lock()
		maybe := lb.maybe
		lb.mu.Unlock()
		if !maybe {
			return nil // never asked for since the last removal
		}
		if err := lb.api.setLabel(ctx, lb.pod, lb.label.Key, nil); err != nil {
			return lb.failed("patch", "cannot remove the leader label from this pod; it is tried again, and the next leader removes it", err)
		}
		lb.mu.Lock()
		lb.maybe = false
		lb.mu.Unlock()
		lb.succeeded("removed the leader label from this pod")
		return nil
	}
	var cleanErr error
	others, err := lb.api.labelled(ctx, lb.pod.Namespace, lb.label)
	if err != nil {
		cleanErr = lb.failed("list", "cannot find other pods that carry the leader label"+goesOn, err)
	}
	for _, name := range others {
		if name == lb.pod.Name {
			continue
		}
		other := Pod{Namespace: lb.pod.Namespace, Name: name}
		if err := lb.api.setLabel(ctx, other, lb.label.Key, nil); err != nil {
			cleanErr = lb.failed("patch", "cannot remove the leader label from another pod"+goesOn, err)
			continue
		}
		lb.log.Info("removed the leader label from another pod, a former leader's", "other", other.String())
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	lb.mu.Lock()
	lb.maybe = true
	lb.mu.Unlock()
	if err := lb.api.setLabel(ctx, lb.pod, lb.label.Key, &lb.label.Value); err != nil {
		return lb.failed("patch", "cannot label this pod as the leader's"+goesOn, err)
	}
	if cleanErr != nil {
		return cleanErr
	}
	lb.succeeded("labelled this pod as the leader's")
	return nil
}

// goesOn ends what a leader says of a label it could not set.
const goesOn = "; leading goes on (the label is routing, the lease is safety), and it is tried again"

// failed says msg (what could not be done) at warning level, once per
// cause until the next success, and returns err.
func (lb *Labeler) failed(verb, msg string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err // the want changed
	}
	cause, forbidden := lb.api.describe(err)
	key := verb + " " + cause
	lb.mu.Lock()
	said := lb.warned[key]
	lb.warned[key] = true
	lb.mu.Unlock()
	if said {
		return err
	}
	attrs := []any{"cause", cause, "err", err}
	if forbidden {
		attrs = append(attrs, "rbac", fmt.Sprintf("the service account needs %s on pods in namespace %s (a Role with verbs list, patch on pods, bound to it: see packaging/kubernetes/rbac.yaml)", verb, lb.pod.Namespace))
	}
	lb.log.Warn(msg, attrs...)
	return err
}

// succeeded says what was done, and that the causes said before are over.
func (lb *Labeler) succeeded(what string) {
	lb.mu.Lock()
	after := len(lb.warned) > 0
	clear(lb.warned)
	lb.mu.Unlock()
	if after {
		lb.log.Info(what + " after all")
		return
	}
	lb.log.Info(what)
}
