package kubernetes

import (
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// credentials are what the store's errors are scrubbed of (lease.Scrub):
// the secrets of the kubeconfig, read at Open, and the credential of
// every request the store sends, recorded as it is sent (an exec plugin's
// token, a token file read anew). An API server, or a proxy before it,
// may echo a request's Authorization header in an error body, which
// client-go puts in the error's text. The zero value holds none; a nil
// *credentials holds none and records nothing.
type credentials struct {
	mu      sync.Mutex // guards the fields below
	secrets []string   // the configuration's
	sent    []string   // the requests', the latest maxSent
}

// maxSecretFile bounds what is read of a token or key file.
const maxSecretFile = 1 << 20

// maxSent bounds the requests' credentials kept: a token file read anew
// (a service account's, rotated hourly) gives a new one each time, and an
// error quotes one that a request sent lately.
const maxSent = 8

func (c *credentials) add(secrets ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(c.secrets, s) {
			c.secrets = append(c.secrets, s)
		}
	}
}

// addSent records the credential a request carried.
func (c *credentials) addSent(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s = strings.TrimSpace(s); s == "" || slices.Contains(c.secrets, s) || slices.Contains(c.sent, s) {
		return
	}
	if len(c.sent) == maxSent {
		c.sent = slices.Delete(c.sent, 0, 1)
	}
	c.sent = append(c.sent, s)
}

// addFile adds the contents of the file at path, if it is a regular file:
// a FIFO a kubeconfig names for a context not used would block Open.
func (c *credentials) addFile(path string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return
	}
	if b, err := io.ReadAll(io.LimitReader(f, maxSecretFile)); err == nil {
		c.add(string(b))
	}
}

// list returns the secrets recorded so far.
func (c *credentials) list() []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Concat(c.secrets, c.sent)
}

// fromKubeconfig adds the secrets of every user of a kubeconfig: tokens
// and the token files' contents, passwords, client keys and the key
// files' contents, an auth provider's tokens and client secret, and the
// values an exec plugin is given in its environment.
func (c *credentials) fromKubeconfig(cfg clientcmdapi.Config) {
	for _, u := range cfg.AuthInfos {
		if u == nil {
			continue
		}
		c.add(u.Token, u.Password, string(u.ClientKeyData))
		c.addFile(u.TokenFile)
		c.addFile(u.ClientKey)
		if u.AuthProvider != nil {
			for k, v := range u.AuthProvider.Config {
				if strings.Contains(k, "token") || strings.Contains(k, "secret") {
					c.add(v)
				}
			}
		}
		if u.Exec != nil {
			for _, env := range u.Exec.Env {
				c.add(env.Value)
			}
		}
	}
}

// fromConfig adds the secrets of the client configuration the store uses
// (in a pod, the service account's token file).
func (c *credentials) fromConfig(cfg *rest.Config) {
	c.add(cfg.BearerToken, cfg.Password, string(cfg.KeyData))
	c.addFile(cfg.BearerTokenFile)
	c.addFile(cfg.KeyFile)
}

// wrap records the credential of every request that passes rt: its
// Authorization header's, after the scheme (Bearer, Basic). It wraps the
// transport below client-go's authentication, so it sees what an exec
// plugin or a token file gave.
func (c *credentials) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if v := req.Header.Get("Authorization"); v != "" {
			if _, cred, ok := strings.Cut(v, " "); ok {
				v = cred
			}
			c.addSent(v)
		}
		return rt.RoundTrip(req)
	})
}
