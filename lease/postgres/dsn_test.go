package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

func TestSplitDSN(t *testing.T) {
	tests := []struct {
		dsn, want    string
		schema       string
		listen, exec bool
	}{
		{"postgres://u@h/db", "postgres://u@h/db", DefaultSchema, true, false},
		{"postgres://u@h/db?leaderrun_schema=lr&sslmode=disable", "postgres://u@h/db?sslmode=disable", "lr", true, false},
		{"postgresql://h1,h2:5433/db?target_session_attrs=read-write&leaderrun_listen=off",
			"postgresql://h1,h2:5433/db?target_session_attrs=read-write", DefaultSchema, false, false},
		{"postgres://h/db?options=-c%20a=b+c&leaderrun_listen=on", "postgres://h/db?options=-c%20a=b+c", DefaultSchema, true, false},
		{"postgres://h/db?default_query_exec_mode=exec&leaderrun_listen=0", "postgres://h/db?default_query_exec_mode=exec", DefaultSchema, false, true},
		{"host=h dbname=db", "host=h dbname=db", DefaultSchema, true, false},
	}
	for _, tt := range tests {
		got, opts, err := splitDSN(tt.dsn)
		if err != nil {
			t.Errorf("splitDSN(%q): %v", tt.dsn, err)
			continue
		}
		if got != tt.want || opts.schema != tt.schema || opts.listen != tt.listen || opts.execModeSet != tt.exec {
			t.Errorf("splitDSN(%q) = %q, %+v; want %q, schema %q, listen %v, exec mode set %v",
				tt.dsn, got, opts, tt.want, tt.schema, tt.listen, tt.exec)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"postgres://u:" + secret + "@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?sslmode=disable"},
		{"postgres://u:" + secret + "@h1,h2/db", "postgres://u@h1,h2/db"},
		{"postgres://u@h/db?password=" + secret + "&sslpassword=" + secret + "&x=1", "postgres://u@h/db?x=1"},
		{"postgres://u:p%40ss" + secret + "@h/db", "postgres://u@h/db"},
		{"host=h password=" + secret + " dbname=db", "host=h  dbname=db"},
		{"host=h password='a b " + secret + "' dbname=db", "host=h  dbname=db"},
		{"postgres://h/db", "postgres://h/db"},
	}
	for _, tt := range tests {
		if got := redact(tt.dsn); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}

// TestErrorsNeverShowPassword opens DSNs that fail before any server is
// involved, in every place a password can be written.
func TestErrorsNeverShowPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:" + secret + "@h:notaport/db",
		"postgres://u:" + secret + "@h/db?leaderrun_listen=maybe",
		"postgres://u@h/db?password=" + secret + "&port=x",
		"postgres://u:" + secret + "@[::1/db",
		"postgres://u:%ZZ" + secret + "@h/db",
		"host=h password=" + secret + " port=notaport",
		"host=h password='" + secret + "' sslmode=bogus",
	} {
		_, err := Open(context.Background(), dsn)
		if err == nil {
			t.Errorf("Open(%q) succeeded, want a parse error", dsn)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open's error shows the password: %v", err)
		}
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Open(%q) = %v, want ErrRefused", redact(dsn), err)
		}
	}
}

// TestRedactionDoesNotNeedAParse: a password with '@', '/', '?' or '#' left
// unescaped must not show, in part, in Describe or in any error, whatever a
// parser makes of the DSN.
func TestRedactionDoesNotNeedAParse(t *testing.T) {
	const password = "Zq7@Xk9?Wm3/Vn5#Yp2:Rt8"
	fragments := []string{"Zq7", "Xk9", "Wm3", "Vn5", "Yp2", "Rt8"}
	dsn := "postgres://app:" + password + "@127.0.0.1:1/db"
	texts := []string{redact(dsn)}
	if _, err := Open(context.Background(), dsn); err != nil {
		texts = append(texts, err.Error())
	}
	for _, text := range texts {
		for _, f := range fragments {
			if strings.Contains(text, f) {
				t.Errorf("%q shows %q, a piece of the password", text, f)
			}
		}
	}
}

func TestRegisteredSchemes(t *testing.T) {
	for _, scheme := range []string{"postgres", "postgresql"} {
		_, err := lease.Open(context.Background(), scheme+"://u:"+secret+"@h:notaport/db")
		if !errors.Is(err, lease.ErrRefused) || strings.Contains(err.Error(), "unknown scheme") {
			t.Errorf("lease.Open(%s://…) = %v, want this package's parse error", scheme, err)
		}
	}
}
