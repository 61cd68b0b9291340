package etcd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// secret is a password with the characters that break naive parsing.
const secret = "S3cr@t:pa/ss?w#rd"

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn       string
		endpoints []string
		prefix    string
		user      string
		password  string
		describe  string
	}{
		{"etcd://h1:2379,h2:2380/app", []string{"http://h1:2379", "http://h2:2380"}, "app", "", "", "etcd://h1:2379,h2:2380/app"},
		{"etcd://h1", []string{"http://h1:2379"}, DefaultPrefix, "", "", "etcd://h1:2379/leaderrun"},
		{"etcd://h1/", []string{"http://h1:2379"}, DefaultPrefix, "", "", "etcd://h1:2379/leaderrun"},
		{"etcds://[::1]:2379,[::2]/a/b-c.d_e", []string{"https://[::1]:2379", "https://[::2]:2379"}, "a/b-c.d_e", "", "", "etcds://[::1]:2379,[::2]:2379/a/b-c.d_e"},
		{"etcd://u:" + secret + "@h1:2379/p", []string{"http://h1:2379"}, "p", "u", secret, "etcd://u@h1:2379/p"},
		{"etcd://u:p%40ss@h1/p", []string{"http://h1:2379"}, "p", "u", "p@ss", "etcd://u@h1:2379/p"},
	}
	for _, tt := range tests {
		c, err := parseDSN(tt.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", redact(tt.dsn), err)
			continue
		}
		if !slices.Equal(c.endpoints, tt.endpoints) || c.prefix != tt.prefix || c.user != tt.user || c.password != tt.password {
			t.Errorf("parseDSN(%q) = endpoints %q, prefix %q, user %q; want %q, %q, %q (and the password)",
				redact(tt.dsn), c.endpoints, c.prefix, c.user, tt.endpoints, tt.prefix, tt.user)
		}
		if got := c.describe(); got != tt.describe {
			t.Errorf("describe(%q) = %q, want %q", redact(tt.dsn), got, tt.describe)
		}
	}
}

func TestParseDSNRefuses(t *testing.T) {
	for _, dsn := range []string{
		"etcd:/h1",
		"http://h1:2379",
		"etcd://",
		"etcd:///prefix",
		"etcd://h1:0",
		"etcd://h1:99999",
		"etcd://h1:x",
		"etcd://h1/bad prefix",
		"etcd://h1/trailing/",
		"etcd://h1/a//b",
		"etcd://h1?bogus=1",
		"etcd://h1?cacert=/a&cacert=/b",
		"etcd://h1?cacert=",
		"etcd://h1?cacert=/ca.pem",
		"etcds://h1?cert=/c.pem",
		"etcd://u@h1",
		"etcd://:pw@h1",
		"etcd://u:pw@h1?password_env=PW",
		"etcd://u@h1?password_file=/f&password_env=PW",
		"etcd://h1?password_env=PW",
		"etcd://u@h1?password_env=no-such-name",
		"etcd://u:%zz@h1",
	} {
		if _, err := parseDSN(dsn); err == nil {
			t.Errorf("parseDSN(%q) succeeded, want an error", dsn)
		} else {
			t.Logf("%s: %v", dsn, err)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"etcd://u:" + secret + "@h1:2379/p", "etcd://u@h1:2379/p"},
		{"etcd://u:" + secret + "@h1:x/bad prefix", "etcd://u@h1:x/bad prefix"},
		{"etcd://h1/p?cacert=/ca.pem", "etcd://h1/p?cacert=/ca.pem"},
		{"u:" + secret + "@h1", "…"},
	}
	for _, tt := range tests {
		if got := redact(tt.dsn); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}

// TestErrorsNeverShowPassword opens DSNs that fail before any server is
// involved, with the password in every place one can be written.
func TestErrorsNeverShowPassword(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LRTEST_ETCD_PW", secret)
	for _, dsn := range []string{
		"etcd://u:" + secret + "@h1:notaport/p",
		"etcd://u:" + secret + "@h1/p?bogus=1",
		"etcd://u:" + secret + "@h1/bad prefix",
		"etcds://u:" + secret + "@h1/p?cacert=" + filepath.Join(dir, "missing.pem"),
		"etcd://u:" + secret + "@h1/p?password_file=" + pwFile,
		"etcd://u@h1:x/p?password_file=" + pwFile,
		"etcd://u@h1:x/p?password_env=LRTEST_ETCD_PW",
		"etcds://u@h1/p?password_env=LRTEST_ETCD_PW&cacert=" + pwFile,
		"etcd:/u:" + secret + "@h1",
		"etcd://u:" + secret,
		"etcd://u:%zz" + secret + "@h1",
	} {
		_, err := Open(context.Background(), dsn)
		if err == nil {
			t.Errorf("Open(%q) succeeded, want an error", redact(dsn))
			continue
		}
		for _, part := range []string{secret, "S3cr", "pa/ss"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("Open's error shows the password: %v", err)
			}
		}
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Open(%q) = %v, want ErrRefused", redact(dsn), err)
		}
		t.Logf("%v", err)
	}
}

func TestPasswordSources(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LRTEST_ETCD_PW", secret)
	for _, dsn := range []string{
		"etcd://u@h1?password_file=" + pwFile,
		"etcd://u@h1?password_env=LRTEST_ETCD_PW",
	} {
		c, err := parseDSN(dsn)
		if err == nil {
			err = c.loadPassword()
		}
		if err != nil {
			t.Errorf("%s: %v", dsn, err)
			continue
		}
		if c.password != secret {
			t.Errorf("%s: password not read as written", dsn)
		}
	}
	c, err := parseDSN("etcd://u@h1?password_file=" + filepath.Join(dir, "missing"))
	if err == nil {
		err = c.loadPassword()
	}
	if err == nil {
		t.Error("a missing password file was accepted")
	}
}

func TestRegisteredSchemes(t *testing.T) {
	for _, scheme := range []string{"etcd", "etcds"} {
		_, err := lease.Open(context.Background(), scheme+"://u:"+secret+"@h:notaport/p")
		if !errors.Is(err, lease.ErrRefused) || strings.Contains(err.Error(), "unknown scheme") || strings.Contains(err.Error(), secret) {
			t.Errorf("lease.Open(%s://…) = %v, want this package's parse error", scheme, err)
		}
	}
}

// TestParseDSNPointsAtTheSlash: a trailing or doubled '/' in the prefix is
// named as such, with the prefix meant (issue 37.8).
func TestParseDSNPointsAtTheSlash(t *testing.T) {
	for dsn, want := range map[string]string{
		"etcd://h1/app/":  `an empty segment (a trailing or doubled '/'); write it as "app"`,
		"etcd://h1/a//b/": `write it as "a/b"`,
	} {
		if _, err := parseDSN(dsn); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseDSN(%q) = %v, want an error with %q", dsn, err, want)
		}
	}
}

// TestOpenNamesUnreachableEndpoints: endpoints where nothing listens are
// named, each with its error, as soon as they refuse, instead of a bare
// "context deadline exceeded" (issue 37.8).
func TestOpenNamesUnreachableEndpoints(t *testing.T) {
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close() // nothing listens there now
	}
	_, err := Open(context.Background(), "etcd://"+strings.Join(addrs, ",")+"/app")
	if err == nil {
		t.Fatal("Open succeeded with nothing listening")
	}
	for _, want := range append([]string{"no etcd endpoint reachable"}, addrs...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %v, want it to name %q", err, want)
		}
	}
	if errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open = %v: refused, want it retried (the cluster may come up)", err)
	}
}
