package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/leaderrun/leaderrun/internal/testenv/fakeserver"
)

// TestHugeServerMessageIsRefused: a server that answers the startup
// message with a message announcing 20 MiB (pgx allocates what it
// announces, up to a gigabyte by default) gets a clear error at once.
func TestHugeServerMessageIsRefused(t *testing.T) {
	addr := fakeserver.Start(t, func(c net.Conn) {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:]))-4); err != nil {
			return
		}
		msg := []byte{'R', 0, 0, 0, 0}
		binary.BigEndian.PutUint32(msg[1:], 20<<20+4)
		c.Write(msg)
		io.Copy(io.Discard, c) // until the client gives up
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, "postgres://leaderrun@"+addr+"/app?sslmode=disable&connect_timeout=5")
	if err == nil {
		s.Close()
		t.Fatal("Open of a server announcing a 20 MiB message succeeded")
	}
	var tooLarge *pgproto3.ExceededMaxBodyLenErr
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Open = %v, want a *pgproto3.ExceededMaxBodyLenErr in its chain", err)
	}
	if got, want := tooLarge.MaxExpectedBodyLen, maxMessageBody; got != want {
		t.Errorf("limit = %d, want %d", got, want)
	}
	t.Logf("Open: %v", err)
}
