package mysql

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// secret is the password of the bad-input DSNs: it has every character
// that ends a URL's user information early.
const secret = "S3cr@t:/?#pw"

// escapedSecret is secret as a DSN must spell it.
var escapedSecret = url.PathEscape(secret)

// wantNoSecret fails if text shows the password or a piece of it.
func wantNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, piece := range []string{secret, escapedSecret, "S3cr", "t:/", "pw"} {
		if strings.Contains(text, piece) {
			t.Errorf("%s shows (a piece of) the password, %q: %s", what, piece, text)
		}
	}
}

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn                      string
		user, pass, addr, dbName string
		tls                      string
		timeout                  time.Duration
		describe                 string
	}{
		{"mysql://u:p@h:3307/db", "u", "p", "h:3307", "db", "", defaultDialTimeout, "mysql://u@h:3307/db"},
		{"mariadb://u@h/db", "u", "", "h:3306", "db", "", defaultDialTimeout, "mariadb://u@h/db"},
		{"mysql://u:" + escapedSecret + "@[::1]/db?tls=skip-verify&timeout=3s", "u", secret, "[::1]:3306", "db",
			"skip-verify", 3 * time.Second, "mysql://u@[::1]/db?tls=skip-verify&timeout=3s"},
		{"mysql://app:x@db.internal:3306/app?tls=true&readTimeout=10s&allowFallbackToPlaintext=false", "app", "x", "db.internal:3306", "app",
			"true", defaultDialTimeout, "mysql://app@db.internal:3306/app?tls=true&readTimeout=10s&allowFallbackToPlaintext=false"},
	} {
		d, err := parseDSN(tc.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.dsn, err)
			continue
		}
		c := d.cfg
		if c.User != tc.user || c.Passwd != tc.pass || c.Addr != tc.addr || c.DBName != tc.dbName ||
			c.TLSConfig != tc.tls || c.Timeout != tc.timeout || c.Net != "tcp" {
			t.Errorf("parseDSN(%q) = user %q, password %q, addr %q, db %q, tls %q, timeout %v; want %q, %q, %q, %q, %q, %v",
				tc.dsn, c.User, c.Passwd, c.Addr, c.DBName, c.TLSConfig, c.Timeout,
				tc.user, tc.pass, tc.addr, tc.dbName, tc.tls, tc.timeout)
		}
		if got := d.describe; got != tc.describe {
			t.Errorf("describe(%q) = %q, want %q", tc.dsn, got, tc.describe)
		}
	}
}

func TestParseDSNRefuses(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u@h/db", "must start with mysql://"},
		{"u:p@tcp(h:3306)/db", "must start with mysql://"},
		{"mysql://u@h", "no database"},
		{"mysql://u@h/a/b", "contains '/'"},
		{"mysql://h/db", "no user"},
		{"mysql://u@:3306/db", "no host"},
		{"mysql://u@h:port/db", "malformed DSN"},
		{"mysql://u@h/db?leaderrun_table=x", "unknown parameter leaderrun_table"},
		{"mysql://u@h/db?sql_mode=ANSI", "unknown parameter sql_mode"},
		{"mysql://u@h/db?tls=true&tls=false", "tls given 2 times"},
		{"mysql://u@h/db?parseTime=false", "parseTime: leaderrun sets it itself"},
		{"mysql://u@h/db?strict=true", "strict: leaderrun sets it itself"}, // the driver panics on it
		{"mysql://u@h/db?tls=custom", `tls="custom"`},
		{"mysql://u@h/db?timeout=soon", "invalid duration"},
		{"mysql://u@h/db?connectionAttributes=mail:a@b", "an '@' after the host"},
		// The driver drops TLS for the whole pool after one handshake
		// without it.
		{"mysql://u@h/db?tls=preferred", "tls=preferred is refused"},
		{"mysql://u@h/db?tls=Preferred", "tls=Preferred is refused"},
		{"mysql://u@h/db?tls=true&allowFallbackToPlaintext=true", "allowFallbackToPlaintext=true is refused"},
		{"mysql://u@h/db?tls=true&allowFallbackToPlaintext=1", "allowFallbackToPlaintext=1 is refused"},
	} {
		_, err := parseDSN(tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseDSN(%q) = %v, want an error containing %q", tc.dsn, err, tc.want)
		}
	}
}

// TestErrorsNeverShowPassword opens DSNs that fail before any server is
// involved, with the password written in every way that can break the
// URL.
func TestErrorsNeverShowPassword(t *testing.T) {
	for _, dsn := range []string{
		"mysql://u:" + secret + "@h:3306/db",
		"mysql://u:" + secret + "@h:3306/db?tls=true",
		"mysql://u:" + escapedSecret + "@h:notaport/db",
		"mysql://u:" + escapedSecret + "@h/db?tls=maybe",
		"mysql://u:" + escapedSecret + "@h/db?parseTime=true",
		"mysql://u:" + escapedSecret + "@h/",
		"mysql://u:%ZZ" + escapedSecret + "@h/db",
		"mysql://u:pw/S3cr@h/db",
		"mysql://u:S3cr@t:12/pw@h/db",
		"mysql://u:S3cr@t:12/db?pw=S3cr@h",
		"mysql://u:S3cr?pw=1@h/db",
		"mysql://u:S3cr#pw@h/db",
		"mysql://u:" + escapedSecret + "@[::1/db",
	} {
		_, err := Open(context.Background(), dsn)
		if err == nil {
			t.Errorf("Open(%s) succeeded, want a parse error", redact(dsn))
			continue
		}
		wantNoSecret(t, "Open's error", err.Error())
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Open(%s) = %v, want ErrRefused", redact(dsn), err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("Open's error spans lines: %q", err)
		}
		wantNoSecret(t, "redact", redact(dsn))
	}
}

func TestRegisteredSchemes(t *testing.T) {
	for _, scheme := range schemes {
		_, err := lease.Open(context.Background(), scheme+"://u:"+escapedSecret+"@h:notaport/db")
		if !errors.Is(err, lease.ErrRefused) || strings.Contains(err.Error(), "unknown scheme") {
			t.Errorf("lease.Open(%s://…) = %v, want this package's parse error", scheme, err)
		}
	}
}
