package redis

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/fakeserver"
)

// TestHostileReplyIsRefused: a server whose reply announces an absurd
// size gets a clear error from Open, not a crash (go-redis's reader
// allocated what the header announced: makeslice panicked).
func TestHostileReplyIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, reply, want string }{
		{"bulk 2^63-2", "$9223372036854775806\r\n", "9223372036854775806 bytes"},
		{"array 2^63-2", "*9223372036854775806\r\n", "9223372036854775806 elements"},
		{"map 2^62", "%4611686018427387904\r\n", "4611686018427387904 elements"},
		{"bulk 100 MB", "$100000000\r\n", "100000000 bytes"},
		{"bulk past int64", "$99999999999999999999\r\n", "malformed"},
		{"bulk -5", "$-5\r\n", "-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeserver.Start(t, fakeRedis(tc.reply))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Open(ctx, "redis://"+addr+"/0")
			if err == nil {
				s.Close()
				t.Fatalf("Open of a server answering %q succeeded", tc.reply)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open = %v, want an error that says %q", err, tc.want)
			}
			var tooLarge *ReplyTooLargeError
			if strings.HasSuffix(tc.want, "s") && !errors.As(err, &tooLarge) {
				t.Errorf("Open = %v, want a *ReplyTooLargeError in its chain", err)
			}
		})
	}
}

// TestScannerFollowsPayloads: a bulk payload that looks like a header is
// payload, whatever the reads' boundaries.
func TestScannerFollowsPayloads(t *testing.T) {
	stream := "*3\r\n$12\r\n$99999999999\r\n:1\r\n$-1\r\n+OK\r\n-ERR x\r\n=15\r\ntxt:*9999999999\r\n%1\r\n+k\r\n_\r\n"
	for cut := 0; cut <= len(stream); cut++ {
		var s respScanner
		if err := s.scan([]byte(stream[:cut])); err != nil {
			t.Fatalf("cut at %d: first part: %v", cut, err)
		}
		if err := s.scan([]byte(stream[cut:])); err != nil {
			t.Fatalf("cut at %d: second part: %v", cut, err)
		}
		if s.state != atStart {
			t.Fatalf("cut at %d: scanner ends in state %d, want at a value's start", cut, s.state)
		}
	}
}

// fakeRedis plays a RESP2 server through the client's handshake (HELLO is
// unknown, CLIENT and SELECT succeed) and answers every other command with
// reply.
func fakeRedis(reply string) func(net.Conn) {
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			cmd, err := readCommand(r)
			if err != nil {
				return
			}
			answer := reply
			switch strings.ToUpper(cmd) {
			case "HELLO":
				answer = "-ERR unknown command 'HELLO'\r\n"
			case "CLIENT", "SELECT", "AUTH":
				answer = "+OK\r\n"
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

// readCommand reads one command (an array of bulk strings) and returns
// its name.
func readCommand(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return "", err
	}
	var name string
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return "", err
		}
		arg := make([]byte, size+2)
		if _, err := io.ReadFull(r, arg); err != nil {
			return "", err
		}
		if i == 0 {
			name = string(arg[:size])
		}
	}
	return name, nil
}

// TestBoundedKeepsHealthChecks: the wrapper of a TCP connection still
// offers go-redis's pool its descriptor, to peek at an idle connection.
func TestBoundedKeepsHealthChecks(t *testing.T) {
	addr := fakeserver.Start(t, func(net.Conn) {})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := bounded(c).(syscall.Conn); !ok {
		t.Error("bounded(TCP connection) is not a syscall.Conn")
	}
}
