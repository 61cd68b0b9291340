package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/internal/lazyre"
)

// DefaultPrefix is the key prefix under which leaderrun keeps its keys when
// the DSN names none.
const DefaultPrefix = "leaderrun"

// defaultPort is etcd's client port, used for a host the DSN gives without
// one.
const defaultPort = "2379"

// DSN query parameters.
const (
	paramCACert       = "cacert"
	paramCert         = "cert"
	paramKey          = "key"
	paramPasswordFile = "password_file"
	paramPasswordEnv  = "password_env"
)

var knownParams = []string{paramCACert, paramCert, paramKey, paramPasswordFile, paramPasswordEnv}

// config is what a DSN says.
type config struct {
	tls       bool
	user      string
	password  string
	endpoints []string // scheme://host:port, as clientv3 takes them
	hosts     []string // host:port, for Describe
	prefix    string
	params    map[string]string
	// fromURL reports that the password was written in the DSN itself.
	fromURL bool
}

var (
	prefixPattern = lazyre.New(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
	envPattern    = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// maxPrefixLen bounds the key prefix.
const maxPrefixLen = 200

// parseDSN parses
//
//	etcd[s]://[user[:password]@]host[:port][,host[:port]…][/prefix][?param=value&…]
//
// The user information ends at the last '@' of the DSN, so that a password
// may contain '@', ':' and '/' even unescaped; a parameter value that
// contains '@' must escape it as %40. Errors never contain the password:
// they quote nothing of the text before that '@' but the user.
func parseDSN(dsn string) (config, error) {
	var c config
	scheme, rest, ok := strings.Cut(dsn, "://")
	switch {
	case !ok:
		return c, errors.New("want etcd://host:2379[,host:2379…][/prefix] or etcds://… for TLS")
	case scheme == "etcds":
		c.tls = true
	case scheme != "etcd":
		return c, fmt.Errorf("scheme %q: want etcd or etcds", scheme)
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		rest = rest[at+1:]
		user, password, hasPassword := strings.Cut(userinfo, ":")
		var err error
		if c.user, err = url.PathUnescape(user); err != nil {
			return c, errors.New("user: malformed %-escape")
		}
		if c.password, err = url.PathUnescape(password); err != nil {
			return c, errors.New("password: malformed %-escape")
		}
		c.fromURL = hasPassword && password != ""
		if c.user == "" {
			return c, errors.New("user information without a user")
		}
	}
	authority, pathQuery, _ := cutAny(rest, "/?")
	path, query, _ := strings.Cut(pathQuery, "?")
	if err := c.parseHosts(authority); err != nil {
		return c, err
	}
	c.prefix = strings.TrimPrefix(path, "/")
	if c.prefix == "" {
		c.prefix = DefaultPrefix
	}
	if strings.HasSuffix(c.prefix, "/") || strings.Contains(c.prefix, "//") {
		return c, fmt.Errorf("prefix %q: an empty segment (a trailing or doubled '/'); write it as %q", c.prefix, strings.Join(slices.DeleteFunc(strings.Split(c.prefix, "/"), func(s string) bool { return s == "" }), "/"))
	}
	if len(c.prefix) > maxPrefixLen || !prefixPattern.MatchString(c.prefix) {
		return c, fmt.Errorf("prefix %q: want up to %d letters, digits, '.', '_' or '-', in segments separated by '/'", c.prefix, maxPrefixLen)
	}
	if err := c.parseParams(query); err != nil {
		return c, err
	}
	return c, c.check()
}

// cutAny cuts s around the first of the bytes in chars; the separator stays
// with after.
func cutAny(s, chars string) (before, after string, found bool) {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return s[:i], s[i:], true
	}
	return s, "", false
}

func (c *config) parseHosts(authority string) error {
	if authority == "" {
		return errors.New("no host: want etcd://host:2379[,host:2379…]")
	}
	scheme := "http://"
	if c.tls {
		scheme = "https://"
	}
	for _, h := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// No port: a name, an IPv4 address or a bracketed IPv6 one.
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defaultPort
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("host %q: port must be 1 to 65535", h)
		}
		if host == "" || strings.ContainsAny(host, " []/\\%") {
			return fmt.Errorf("host %q: malformed", h)
		}
		addr := net.JoinHostPort(host, port)
		c.hosts = append(c.hosts, addr)
		c.endpoints = append(c.endpoints, scheme+addr)
	}
	return nil
}

func (c *config) parseParams(query string) error {
	c.params = map[string]string{}
	if query == "" {
		return nil
	}
	for _, pair := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return fmt.Errorf("parameter %q: malformed %%-escape", k)
		}
		value, err := url.PathUnescape(v)
		if err != nil {
			return fmt.Errorf("parameter %s: malformed %%-escape", key)
		}
		switch {
		case !isKnown(key):
			return fmt.Errorf("unknown parameter %q (known: %s)", key, strings.Join(knownParams, ", "))
		case value == "":
			return fmt.Errorf("parameter %s: empty value", key)
		}
		if _, dup := c.params[key]; dup {
			return fmt.Errorf("parameter %s given twice", key)
		}
		c.params[key] = value
	}
	return nil
}

func isKnown(key string) bool {
	for _, k := range knownParams {
		if k == key {
			return true
		}
	}
	return false
}

// check validates the parameters together.
func (c *config) check() error {
	p := c.params
	for _, k := range []string{paramCACert, paramCert, paramKey} {
		if _, ok := p[k]; ok && !c.tls {
			return fmt.Errorf("parameter %s needs TLS: write etcds://", k)
		}
	}
	if (p[paramCert] == "") != (p[paramKey] == "") {
		return fmt.Errorf("parameters %s and %s go together", paramCert, paramKey)
	}
	sources := 0
	for _, set := range []bool{c.fromURL, p[paramPasswordFile] != "", p[paramPasswordEnv] != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources > 1:
		return fmt.Errorf("the password comes from more than one of the DSN, %s and %s", paramPasswordFile, paramPasswordEnv)
	case sources == 1 && c.user == "":
		return errors.New("a password needs a user: etcd://user@host…")
	case sources == 0 && c.user != "":
		return fmt.Errorf("user %q has no password: write it in the DSN, or name a file (%s) or an environment variable (%s)", c.user, paramPasswordFile, paramPasswordEnv)
	}
	if v := p[paramPasswordEnv]; v != "" && !envPattern.MatchString(v) {
		return fmt.Errorf("%s=%q: want the name of an environment variable", paramPasswordEnv, v)
	}
	return nil
}

// loadPassword reads the password from the file or environment variable
// the DSN names, if it names one.
func (c *config) loadPassword() error {
	if path := c.params[paramPasswordFile]; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%s: %w", paramPasswordFile, err)
		}
		c.password = strings.TrimRight(string(b), "\r\n")
		if c.password == "" {
			return fmt.Errorf("%s %s is empty", paramPasswordFile, path)
		}
	}
	if name := c.params[paramPasswordEnv]; name != "" {
		c.password = os.Getenv(name)
		if c.password == "" {
			return fmt.Errorf("%s: environment variable %s is unset or empty", paramPasswordEnv, name)
		}
	}
	return nil
}

// tlsConfig builds the client's TLS configuration, or nil for etcd://.
func (c *config) tlsConfig() (*tls.Config, error) {
	if !c.tls {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if path := c.params[paramCACert]; path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", paramCACert, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", paramCACert, path)
		}
	}
	if cert := c.params[paramCert]; cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, c.params[paramKey])
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", paramCert, paramKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func (c *config) scheme() string {
	if c.tls {
		return "etcds"
	}
	return "etcd"
}

// describe is the DSN without the password and parameters.
func (c *config) describe() string {
	s := c.scheme() + "://"
	if c.user != "" {
		s += url.PathEscape(c.user) + "@"
	}
	return s + strings.Join(c.hosts, ",") + "/" + c.prefix
}

// redact shows a DSN that may not parse without any password: it drops
// everything between "://" and the last '@' but the user.
func redact(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		if strings.Contains(dsn, "@") {
			return "…"
		}
		return dsn
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return dsn
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + rest[at:]
}

// secrets lists the password as written in dsn and as decoded, for
// scrubbing from messages.
func secrets(dsn string, c config) []string {
	var s []string
	if c.password != "" {
		s = append(s, c.password)
	}
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
				s = append(s, pw)
			}
		}
	}
	return s
}
