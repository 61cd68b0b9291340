package podlabel

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"role=leader", "role=leader", ""},
		{"example.com/role=leader", "example.com/role=leader", ""},
		{"leader=", "leader=", ""}, // an empty value is a value
		{"role", "", "want KEY=VALUE"},
		{"", "", "want KEY=VALUE"},
		{"=leader", "", `the key "" is not a valid label key`},
		{"-role=leader", "", `the key "-role" is not a valid label key`},
		{"a/b/c=d", "", `the key "a/b/c" is not a valid label key`},
		{strings.Repeat("k", 64) + "=v", "", "is not a valid label key"},
		{"role=le ader", "", `the value "le ader" is not a valid label value`},
		{"role=" + strings.Repeat("v", 64), "", "is not a valid label value"},
		{"role=a=b", "", `the value "a=b" is not a valid label value`},
	} {
		got, err := Parse(tc.in)
		switch {
		case tc.err == "" && (err != nil || got.String() != tc.want):
			t.Errorf("Parse(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Parse(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
		}
	}
}

func TestFindPod(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	host := func(h string) func() (string, error) { return func() (string, error) { return h, nil } }
	noHost := func() (string, error) { return "", errors.New("no host name") }
	file := func(content string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if path != namespaceFile || content == "" {
				return nil, os.ErrNotExist
			}
			return []byte(content), nil
		}
	}
	for _, tc := range []struct {
		what     string
		getenv   func(string) string
		hostname func() (string, error)
		readFile func(string) ([]byte, error)
		fallback string
		want     string
		err      string
	}{
		{"the downward API", env("POD_NAME", "relay-7d9f-a", "POD_NAMESPACE", "relay"), noHost, file(""), "", "relay/relay-7d9f-a", ""},
		{"the host name and the service account's namespace", env(), host("relay-7d9f-b"), file("relay\n"), "other", "relay/relay-7d9f-b", ""},
		{"POD_NAMESPACE before the file", env("POD_NAMESPACE", "mine"), host("p"), file("theirs"), "", "mine/p", ""},
		{"the configuration's namespace last", env("POD_NAME", "p"), noHost, file(""), "ctx", "ctx/p", ""},
		{"no name", env(), noHost, file("relay"), "", "", "POD_NAME is not set"},
		{"no namespace", env("POD_NAME", "p"), noHost, file(""), "", "", "POD_NAMESPACE is not set"},
		{"not a pod's name", env("POD_NAME", "Relay_A", "POD_NAMESPACE", "relay"), noHost, file(""), "", "", `pod name "Relay_A"`},
		{"not a namespace", env("POD_NAME", "p", "POD_NAMESPACE", "Relay"), noHost, file(""), "", "", `namespace "Relay"`},
	} {
		got, err := findPod(tc.getenv, tc.hostname, tc.readFile, tc.fallback)
		switch {
		case tc.err == "" && (err != nil || got.String() != tc.want):
			t.Errorf("%s: findPod = %v, %v; want %s", tc.what, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: findPod = %v, %v; want an error saying %q", tc.what, got, err, tc.err)
		}
	}
}
