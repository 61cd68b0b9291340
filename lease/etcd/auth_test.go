package etcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
	"github.com/leaderrun/leaderrun/lease"
)

// exercise runs a tenure's operations through s.
func exercise(t *testing.T, s *Store) {
	t.Helper()
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := s.Renew(ctx, "n", "a", rec.Token, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := s.Get(ctx, "n"); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := s.Wait(ctx, "n", rec, 10*time.Millisecond); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := s.Join(ctx, "g", 2, "a", time.Minute); err != nil {
		t.Fatalf("Join: %v", err)
	}
	if err := s.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestAuth runs the store as an etcd user whose role may read and write
// only the store's prefix, and checks that a wrong password and a user
// without that permission are refused, without the password in any error.
func TestAuth(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1})
	admin := c.Client(t)
	ctx := testCtx(t)
	const prefix = "app"
	steps := []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "leaderrun"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "leaderrun", prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/"),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "app", secret); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "app", "leaderrun"); return err },
		func() error { _, err := admin.UserAdd(ctx, "other", secret); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("set up auth: %v", err)
		}
	}
	addr := c.Endpoints()[0]

	s := openStore(t, "etcd://app:"+secret+"@"+addr+"/"+prefix)
	if strings.Contains(s.Describe(), "S3cr") || !strings.Contains(s.Describe(), "app@") {
		t.Errorf("Describe() = %q, want the user and no password", s.Describe())
	}
	exercise(t, s)

	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	openStore(t, "etcd://app@"+addr+"/"+prefix+"?password_file="+pwFile)

	for _, tc := range []struct{ what, dsn string }{
		{"wrong password", "etcd://app:" + secret + "x@" + addr + "/" + prefix},
		{"user without permission", "etcd://other:" + secret + "@" + addr + "/" + prefix},
		{"prefix outside the role's permission", "etcd://app:" + secret + "@" + addr + "/elsewhere"},
	} {
		_, err := Open(testCtx(t), tc.dsn)
		switch {
		case !errors.Is(err, lease.ErrRefused):
			t.Errorf("%s: Open = %v, want ErrRefused", tc.what, err)
		case strings.Contains(err.Error(), "S3cr"):
			t.Errorf("%s: Open's error shows the password: %v", tc.what, err)
		}
		t.Logf("%s: %v", tc.what, err)
	}
}

// TestTLS runs the store over TLS with a client certificate, and checks
// that a client without one is turned away.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	newCert(t, dir, "client", ca, caKey)
	file := func(name string) string { return filepath.Join(dir, name) }
	pair, err := tls.LoadX509KeyPair(file("client.pem"), file("client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	c := etcdtest.Start(t, etcdtest.Options{
		Members:  1,
		CertFile: file("server.pem"), KeyFile: file("server-key.pem"), ClientCA: file("ca.pem"),
		ClientTLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}},
	})
	addr := c.Endpoints()[0]
	s := openStore(t, "etcds://"+addr+"/p?cacert="+file("ca.pem")+"&cert="+file("client.pem")+"&key="+file("client-key.pem"))
	exercise(t, s)

	other, otherKey := newCert(t, t.TempDir(), "other-ca", nil, nil)
	otherDir := t.TempDir()
	newCert(t, otherDir, "stranger", other, otherKey)
	for _, tc := range []struct{ what, dsn string }{
		{"no client certificate", "etcds://" + addr + "/p?cacert=" + file("ca.pem")},
		{"a client certificate of another CA", "etcds://" + addr + "/p?cacert=" + file("ca.pem") +
			"&cert=" + filepath.Join(otherDir, "stranger.pem") + "&key=" + filepath.Join(otherDir, "stranger-key.pem")},
		{"the server's CA unknown", "etcds://" + addr + "/p?cert=" + file("client.pem") + "&key=" + file("client-key.pem")},
	} {
		start := time.Now()
		s, err := Open(testCtx(t), tc.dsn)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.what)
			continue
		}
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("%s: Open = %v, want ErrRefused (a certificate problem no retry fixes)", tc.what, err)
		}
		t.Logf("%s: after %v: %v", tc.what, time.Since(start).Round(time.Millisecond), err)
	}
}

// newCert writes NAME.pem and NAME-key.pem to dir: a CA when parent is
// nil, else a certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, kind string, b []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	write(filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
