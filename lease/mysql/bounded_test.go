package mysql

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/fakeserver"
)

// TestMalformedHandshakeIsRefused: a server whose handshake packet ends
// after the server version (the driver read the fields after it by offset,
// and panicked) gets a clear error from Open.
func TestMalformedHandshakeIsRefused(t *testing.T) {
	addr := fakeserver.Start(t, func(c net.Conn) {
		payload := append([]byte{10}, "5.5\x00"...) // protocol 10, the version, and nothing more
		c.Write(append([]byte{byte(len(payload)), 0, 0, 0}, payload...))
		io.Copy(io.Discard, c) // until the client gives up
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, "mysql://root@"+addr+"/app")
	if err == nil {
		s.Close()
		t.Fatal("Open of a server with a malformed handshake succeeded")
	}
	if !errors.Is(err, ErrMalformedHandshake) {
		t.Fatalf("Open = %v, want ErrMalformedHandshake in its chain", err)
	}
	t.Logf("Open: %v", err)
}
