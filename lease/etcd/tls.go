package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/internal/tcpdial"
)

// tlsProbeRead is how long diagnoseTLS waits for the server to turn the
// client certificate down after the handshake: a TLS 1.3 server does so
// only after the client's handshake has finished.
const tlsProbeRead = 500 * time.Millisecond

// diagnoseTLS looks for the reason a TLS cluster may not answer Open, which
// gRPC only reports as a timeout: it makes a TLS connection to each host as
// the client would and reports the first certificate the other side does
// not accept (an unknown authority, a name the server's certificate does
// not cover, a client certificate missing or refused), an error no retry
// fixes. It returns nil when it finds none, or when ctx ends.
func diagnoseTLS(ctx context.Context, cfg *tls.Config, hosts []string) error {
	for _, addr := range hosts {
		host, _, _ := net.SplitHostPort(addr)
		c := cfg.Clone()
		c.ServerName = host
		d := tls.Dialer{NetDialer: tcpdial.New(), Config: c}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err != nil {
			if certProblem(err) {
				return fmt.Errorf("TLS with %s: %w", addr, err)
			}
			continue // unreachable, not a certificate problem
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		conn.SetReadDeadline(time.Now().Add(tlsProbeRead))
		_, err = conn.Read(make([]byte, 1))
		stop()
		conn.Close()
		if certProblem(err) {
			return fmt.Errorf("TLS with %s: %w", addr, err)
		}
	}
	return nil
}

// certProblem reports whether err is a TLS verdict on a certificate: ours
// (a verification error) or the server's (an alert it sent, which
// crypto/tls reports as a "remote error").
func certProblem(err error) bool {
	var verify *tls.CertificateVerificationError
	var op *net.OpError
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded) &&
		(errors.As(err, &verify) || errors.As(err, &op) && op.Op == "remote error")
}
