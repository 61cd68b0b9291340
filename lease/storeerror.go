package lease

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ErrorPolicy is how a store reports its driver's errors: which of them no
// retry can fix, and what to do about them. Each store declares one; Wrap
// is the part they share.
type ErrorPolicy struct {
	// Permanent reports whether no retry can fix err (a refused login, a
	// missing privilege, a read-only server). Nil: none is.
	Permanent func(err error) bool
	// Hint says what to do about a permanent error where the server's
	// message does not, or returns "". Nil: no hints.
	Hint func(err error) string
}

// Wrap adds op as context to err, marks it ErrRefused when no retry can
// fix it, folds its text onto one line and scrubs every secret from that
// text (Scrub). The result matches err and, when refused, ErrRefused with
// errors.Is and errors.As.
//
// Nil, and the errors callers branch on, pass through unchanged: ErrLost,
// ErrNotFound, ErrClosed, the step-down refusals (ErrNotHeld,
// ErrUnknownSuccessor, ErrAlreadyLeader) and *HeldError. Their text holds
// no driver message, so there is nothing in it to scrub.
func (p ErrorPolicy) Wrap(op string, err error, secrets []string) error {
	if err == nil || PassesThrough(err) {
		return err
	}
	msg := fmt.Sprintf("%s: %s", op, oneLine(err.Error()))
	cause := []error{err}
	if errors.Is(err, ErrRefused) || BadCertificate(err) || (p.Permanent != nil && p.Permanent(err)) {
		if BadCertificate(err) {
			msg += " (the server's certificate does not verify: give the CA that signed it, or a host name the certificate names)"
		} else if p.Hint != nil {
			if hint := p.Hint(err); hint != "" {
				msg += " (" + hint + ")"
			}
		}
		if !errors.Is(err, ErrRefused) {
			msg += ": " + ErrRefused.Error()
			cause = append(cause, ErrRefused)
		}
	}
	return &storeError{msg: Scrub(oneLine(msg), secrets), cause: cause}
}

// BadCertificate reports whether err is a TLS certificate that did not
// verify (an unknown authority, a name it does not hold, an expired or
// otherwise invalid certificate): a configuration error on every store,
// which no retry mends.
func BadCertificate(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		certInvalid      x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &certInvalid) || errors.As(err, &verify)
}

// PassesThrough reports whether err is one of the answers the Store contract
// defines (a *HeldError, ErrLost, ErrNotFound, …), which Wrap returns
// unchanged and callers branch on.
func PassesThrough(err error) bool {
	var held *HeldError
	if errors.As(err, &held) {
		return true
	}
	for _, s := range []error{ErrLost, ErrNotFound, ErrClosed, ErrNotHeld, ErrUnknownSuccessor, ErrAlreadyLeader} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// storeError is an error whose text had secrets scrubbed from it. It
// unwraps to the original error (and to ErrRefused when refused).
type storeError struct {
	msg   string
	cause []error
}

func (e *storeError) Error() string   { return e.msg }
func (e *storeError) Unwrap() []error { return e.cause }

// scrubbed is what Scrub puts in place of a secret.
const scrubbed = "xxxxx"

// Scrub replaces every secret in msg with "xxxxx": as given, and in every
// form a driver or a parser may echo it in — percent-encoded (query and
// path style) or decoded, quoted with Go's escapes, and with its white
// space folded as Wrap folds messages. Longer forms go first, so that a
// secret that contains another goes whole. Empty secrets are ignored.
func Scrub(msg string, secrets []string) string {
	var forms []string
	add := func(v string) {
		if v != "" && !slices.Contains(forms, v) {
			forms = append(forms, v)
		}
	}
	for _, s := range secrets {
		plain := []string{s}
		if u, err := url.QueryUnescape(s); err == nil {
			plain = append(plain, u)
		}
		if u, err := url.PathUnescape(s); err == nil {
			plain = append(plain, u)
		}
		for _, p := range plain {
			for _, v := range []string{p, url.QueryEscape(p), url.PathEscape(p), oneLine(p)} {
				add(v)
				q := strconv.Quote(v)
				add(q[1 : len(q)-1])
			}
		}
	}
	slices.SortStableFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, f := range forms {
		msg = strings.ReplaceAll(msg, f, scrubbed)
	}
	return msg
}

// oneLine folds every run of white space in s, line breaks included, into
// one space.
//
// A line that repeats an earlier one is dropped: a driver that tried the
// same server twice (pgx with sslmode=prefer: TLS, then without) joins the
// same error twice.
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ")
}
