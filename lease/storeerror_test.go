package lease_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// errDenied stands for a driver's error that no retry fixes.
var errDenied = errors.New("permission denied")

var policy = lease.ErrorPolicy{
	Permanent: func(err error) bool { return errors.Is(err, errDenied) },
	Hint: func(err error) string {
		if errors.Is(err, errDenied) {
			return "grant the privileges"
		}
		return ""
	},
}

// TestWrapPassesSentinelsThrough: the errors callers branch on come back
// unchanged, from every store, so that none wraps one another does not.
func TestWrapPassesSentinelsThrough(t *testing.T) {
	held := &lease.HeldError{Record: lease.Record{Name: "n", Holder: "h", Token: 3}}
	for _, err := range []error{
		nil, lease.ErrLost, lease.ErrNotFound, lease.ErrClosed, lease.ErrNotHeld,
		lease.ErrUnknownSuccessor, lease.ErrAlreadyLeader, held,
		fmt.Errorf("renew: %w", lease.ErrLost),
	} {
		if got := policy.Wrap("op", err, []string{"pw"}); got != err {
			t.Errorf("Wrap(%v) = %v, want it unchanged", err, got)
		}
	}
}

func TestWrapRefusesPermanent(t *testing.T) {
	cause := fmt.Errorf("driver: %w", errDenied)
	err := policy.Wrap("open store", cause, nil)
	if !errors.Is(err, lease.ErrRefused) || !errors.Is(err, errDenied) {
		t.Errorf("Wrap(permanent) = %v, want it to match ErrRefused and the cause", err)
	}
	if got, want := err.Error(), "open store: driver: permission denied (grant the privileges): store refused"; got != want {
		t.Errorf("Wrap(permanent) = %q, want %q", got, want)
	}

	// Already refused: the hint is added, the mark is not doubled.
	err = policy.Wrap("open store", lease.Refused(errDenied), nil)
	if got, want := err.Error(), "open store: permission denied (grant the privileges)"; got != want {
		t.Errorf("Wrap(refused) = %q, want %q", got, want)
	}

	// Transient: context only; context errors stay visible.
	err = policy.Wrap("renew", fmt.Errorf("read: %w", context.DeadlineExceeded), nil)
	if errors.Is(err, lease.ErrRefused) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wrap(transient) = %v, want it unrefused and matching the cause", err)
	}
	if got, want := err.Error(), "renew: read: context deadline exceeded"; got != want {
		t.Errorf("Wrap(transient) = %q, want %q", got, want)
	}

	// The zero policy refuses nothing but what is already refused.
	if err := (lease.ErrorPolicy{}).Wrap("op", errDenied, nil); errors.Is(err, lease.ErrRefused) {
		t.Errorf("zero policy: Wrap = %v, want it unrefused", err)
	}
}

// TestWrapRefusesBadCertificate: a certificate that does not verify is
// refused by every store's policy, the zero one too (issue 37.5).
func TestWrapRefusesBadCertificate(t *testing.T) {
	for _, cause := range []error{
		&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}},
		fmt.Errorf("write failed: %w", x509.HostnameError{Host: "db"}),
		x509.CertificateInvalidError{Reason: x509.Expired},
	} {
		err := (lease.ErrorPolicy{}).Wrap("open store", cause, nil)
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Wrap(%v) = %v, want it refused", cause, err)
		}
		if !strings.Contains(err.Error(), "certificate does not verify") {
			t.Errorf("Wrap(%v) = %v, want it to say the certificate does not verify", cause, err)
		}
	}
}

func TestWrapIsOneLine(t *testing.T) {
	err := policy.Wrap("acquire", errors.New("server said:\n\tno\r\n  way"), nil)
	if got, want := err.Error(), "acquire: server said: no way"; got != want {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
	// pgx with sslmode=prefer joins one error per attempt: the same
	// FATAL twice is said once (issue 37.15).
	fatal := "127.0.0.1:5432 (127.0.0.1): server error: FATAL: role \"x\" does not exist (SQLSTATE 28000)"
	err = policy.Wrap("open", fmt.Errorf("failed to connect:\n\t%s\n\t%s", fatal, fatal), nil)
	if got, want := err.Error(), "open: failed to connect: "+fatal; got != want {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
}

// TestScrub: no form of a secret that a driver or parser may echo survives,
// in Scrub or in Wrap's text.
func TestScrub(t *testing.T) {
	const pw = "p@ss w/rd:S3cret%21\"\n x"
	decoded, _ := url.PathUnescape(pw)
	forms := []string{
		pw, url.QueryEscape(pw), url.PathEscape(pw), decoded, fmt.Sprintf("%q", pw),
		strings.Join(strings.Fields(pw), " "),
	}
	for _, f := range forms {
		msg := "cannot use " + f + " nor " + f + " here"
		for name, got := range map[string]string{
			"Scrub": lease.Scrub(msg, []string{pw, ""}),
			"Wrap":  policy.Wrap("op", errors.New(msg), []string{pw}).Error(),
		} {
			if strings.Contains(got, "S3cret") {
				t.Errorf("%s(%q) = %q, shows the secret", name, msg, got)
			}
		}
	}
	// A secret that contains another goes whole.
	if got, want := lease.Scrub("a abc", []string{"a", "abc"}), "xxxxx xxxxx"; got != want {
		t.Errorf("Scrub = %q, want %q", got, want)
	}
	// Empty secrets change nothing.
	if got, want := lease.Scrub("text", []string{""}), "text"; got != want {
		t.Errorf("Scrub(empty secret) = %q, want %q", got, want)
	}
}
