package etcd

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLargeReplyIsRefused: a reply larger than the client accepts is a
// clear error (the client's default accepts 2 GiB). The bound is lowered
// for the test, below what one record written behind the store's back
// makes a read return.
func TestLargeReplyIsRefused(t *testing.T) {
	defer func(old int) { maxReply = old }(maxReply)
	maxReply = 256 << 10
	c, prefix := newPrefix(t)
	s := openStore(t, dsnFor(prefix, c.Endpoints()...))
	admin := c.Client(t)
	if _, err := admin.Put(testCtx(t), s.keysOf("n").record, strings.Repeat("x", 300<<10)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(testCtx(t), "n")
	if err == nil {
		t.Fatal("Get of a 300 KiB record with a 256 KiB bound succeeded")
	}
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &st) || st.GRPCStatus().Code() != codes.ResourceExhausted {
		t.Fatalf("Get = %v, want a ResourceExhausted status in its chain", err)
	}
	t.Logf("Get: %v", err)
	// A small reply still passes.
	if _, err := s.Acquire(testCtx(t), "m", "a", time.Minute); err != nil {
		t.Fatalf("Acquire after the refused reply: %v", err)
	}
}
