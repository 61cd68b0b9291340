package redis

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/lease"
)

// secret is the password the bad-input DSNs carry; no error or description
// may show it, whole or in part.
const secret = "S3cret-Pw0rd"

// withUser returns a server URL with its user information set to
// user:password, percent-encoded.
func withUser(t *testing.T, serverURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

func wantNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, part := range []string{secret, "S3cret", "Pw0rd"} {
		if strings.Contains(text, part) {
			t.Errorf("%s shows (part of) the password: %s", what, text)
		}
	}
}

func openErr(t *testing.T, dsn string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) succeeded, want an error", redact(dsn))
	}
	wantNoSecret(t, "Open's error", err.Error())
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Open's error spans lines: %q", err)
	}
	return err
}

func TestOpenRefusesWhatNoRetryFixes(t *testing.T) {
	base := serverURL(t)
	host := strings.TrimPrefix(base, "redis://")
	host, _, _ = strings.Cut(host, "/")
	srv := redistest.StartServer(t)
	admin := adminClient(t, srv.URL())
	if err := admin.Do(testCtx(t), "ACL", "SETUSER", "weak", "on", ">"+secret, "~*", "&*", "+@all", "-evalsha", "-eval").Err(); err != nil {
		t.Fatal(err)
	}
	replica := redistest.StartServer(t, "--replicaof", "127.0.0.1", "1")
	evicting := redistest.StartServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	cases := []struct {
		what string
		dsn  string
	}{
		{"malformed port", "redis://u:" + secret + "@" + "127.0.0.1:99999999/0"},
		{"password with @ : / not percent-encoded", "redis://u:p@ss:w/rd-" + secret + "@" + host + "/0"},
		{"password with ? not percent-encoded", "redis://u:pw?" + secret + "@" + host + "/0"},
		{"not a redis URL", "http://u:" + secret + "@" + host + "/0"},
		{"unknown leaderrun parameter", withUser(t, base, "u", secret) + "?leaderrun_bogus=1"},
		{"unknown go-redis parameter", withUser(t, base, "u", secret) + "?bogus=1"},
		{"repeated leaderrun parameter", withUser(t, base, "u", secret) + "?leaderrun_prefix=a&leaderrun_prefix=b"},
		{"repeated go-redis parameter", withUser(t, base, "u", secret) + "?dial_timeout=1s&dial_timeout=2s"},
		{"bad prefix", withUser(t, base, "u", secret) + "?leaderrun_prefix=a*b"},
		{"bad wait_replicas", withUser(t, base, "u", secret) + "?leaderrun_wait_replicas=some"},
		{"bad database number", "redis://u:" + secret + "@" + host + "/zero"},
		{"unknown database", "redis://" + host + "/99999"},
		{"unknown user", withUser(t, base, "lrtest_no_such_user", secret)},
		{"wrong password", withUser(t, srv.URL(), "weak", "not-"+secret)},
		{"read-only replica", replica.URL()},
		{"allkeys eviction policy", evicting.URL()},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			err := openErr(t, c.dsn)
			if !errors.Is(err, lease.ErrRefused) {
				t.Errorf("Open = %v, want an error wrapping lease.ErrRefused", err)
			}
			t.Logf("%v", err)
		})
	}

	// A user that may not run scripts opens (the server answers), and
	// its first Acquire is refused.
	s := openStore(t, withUser(t, srv.URL(), "weak", secret))
	_, err := s.Acquire(testCtx(t), "n", "a", time.Minute)
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Acquire without permission to run scripts = %v, want ErrRefused", err)
	}
	wantNoSecret(t, "Acquire's error", err.Error())
	t.Logf("%v", err)
}

func TestOpenUnreachableIsNotRefused(t *testing.T) {
	err := openErr(t, "redis://u:"+secret+"@127.0.0.1:1/0?dial_timeout=2s")
	if errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open of an unreachable server = %v, want an error a retry may fix (not ErrRefused)", err)
	}
	t.Logf("%v", err)
}

// TestACLPermissions opens the store as a user with exactly the
// permissions the documentation lists, and runs every operation.
func TestACLPermissions(t *testing.T) {
	srv := redistest.StartServer(t)
	dsn := aclUser(t, srv, ACLRules(DefaultPrefix))
	a, b := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := a.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := b.Acquire(ctx, "n", "b", time.Minute); !isHeld(err) {
		t.Fatalf("second Acquire = %v, want *lease.HeldError", err)
	}
	done := startWait(t, b, "n", rec, 30*time.Second)
	subscribed(t, b, "n")
	if _, err := a.Renew(ctx, "n", "a", rec.Token, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := a.Annotate(ctx, "n", "a", rec.Token, "here"); err != nil {
		t.Fatalf("Annotate: %v", err)
	}
	wantWoken(t, done, 5*time.Second)
	if _, err := b.RequestStepDown(ctx, "n", "b", time.Minute); err != nil {
		t.Fatalf("RequestStepDown: %v", err)
	}
	campaign(t, b)
	if err := a.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := b.List(ctx); err != nil {
		t.Fatalf("List: %v", err)
	}
	if err := forgetNow(ctx, a, "n"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := a.Join(ctx, "g", 2, "a", time.Minute); err != nil {
		t.Fatalf("Join: %v", err)
	}
	if _, err := a.RenewMember(ctx, "g", "a", nil, time.Minute); err != nil {
		t.Fatalf("RenewMember: %v", err)
	}
	if err := a.Leave(ctx, "g", "a"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	// Outside its prefix the user may do nothing.
	other := openStore(t, dsn+"?leaderrun_prefix=other")
	if _, err := other.Acquire(ctx, "n", "a", time.Minute); !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Acquire under a prefix the user may not touch = %v, want ErrRefused", err)
	}
}

// TestACLOfEarlierRulesCampaigns: a user with the rules ACLRules returned
// before Forget (no DEL) still campaigns: Acquire, Campaign, Candidates
// and Withdraw run only the commands it may run.
func TestACLOfEarlierRulesCampaigns(t *testing.T) {
	srv := redistest.StartServer(t)
	rules := strings.Replace(ACLRules(DefaultPrefix), " +del ", " ", 1)
	if strings.Contains(rules, "+del") {
		t.Fatalf("rules %q still allow DEL", rules)
	}
	dsn := aclUser(t, srv, rules)
	a, b := openStore(t, dsn), openStore(t, dsn)
	if _, err := a.Acquire(testCtx(t), "n", "a", time.Minute); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	campaign(t, b)
}

// aclUser creates a user with rules on srv and returns its DSN.
func aclUser(t *testing.T, srv *redistest.Server, rules string) string {
	t.Helper()
	args := []any{"ACL", "SETUSER", "lr", "on", ">" + secret}
	for _, a := range strings.Fields(rules) {
		args = append(args, a)
	}
	if err := adminClient(t, srv.URL()).Do(testCtx(t), args...).Err(); err != nil {
		t.Fatal(err)
	}
	return withUser(t, srv.URL(), "lr", secret)
}

// campaign has c campaign through s for "n", held by another, refused,
// listed with what it said, and withdrawn.
func campaign(t *testing.T, s *Store) {
	t.Helper()
	ctx := testCtx(t)
	said := lease.Candidacy{Priority: 2, Note: "n"}
	if err := s.Campaign(ctx, "n", "c", said, time.Minute); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if _, err := s.Acquire(ctx, "n", "c", time.Minute); !isHeld(err) {
		t.Fatalf("Acquire of a held name by a campaigner = %v, want *lease.HeldError", err)
	}
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatalf("Candidates: %v", err)
	}
	if i := slices.IndexFunc(got, func(c lease.Standing) bool { return c.Holder == "c" }); i < 0 || got[i].Candidacy != said {
		t.Fatalf("Candidates = %+v, want c with %+v", got, said)
	}
	if err := s.Withdraw(ctx, "n", "c"); err != nil {
		t.Fatalf("Withdraw: %v", err)
	}
}

// forgetNow is Forget, again while the token is ahead of the clock.
func forgetNow(ctx context.Context, s *Store, name string) error {
	for {
		err := s.Forget(ctx, name)
		if !errors.Is(err, lease.ErrTokenAhead) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

func isHeld(err error) bool {
	var held *lease.HeldError
	return errors.As(err, &held)
}

func TestDescribeHasNoPassword(t *testing.T) {
	base := serverURL(t)
	s := openStore(t, withUser(t, base, "default", secret)) // the default user has no password: any goes
	wantNoSecret(t, "Describe()", s.Describe())
	if !strings.Contains(s.Describe(), "default@") {
		t.Errorf("Describe() = %q, want the user shown", s.Describe())
	}
}
