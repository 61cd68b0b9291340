package redis

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/lease"
)

// monitor records the commands a server receives from clients (not those
// its scripts run), through MONITOR on a raw connection.
type monitor struct {
	conn  net.Conn
	lines *bufio.Reader
}

func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &monitor{conn: conn, lines: bufio.NewReader(conn)}
	fmt.Fprint(conn, "MONITOR\r\n")
	if line := m.next(t); line != "+OK" {
		t.Fatalf("MONITOR answered %q", line)
	}
	return m
}

func (m *monitor) next(t *testing.T) string {
	t.Helper()
	m.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := m.lines.ReadString('\n')
	if err != nil {
		t.Fatalf("read MONITOR: %v", err)
	}
	return strings.TrimRight(line, "\r\n")
}

// until returns the commands clients sent, by name, until one sends ECHO
// marker; commands that scripts ran ("[0 lua]") are left out.
func (m *monitor) until(t *testing.T, marker string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for {
		line := m.next(t)
		// +1700000000.123456 [0 127.0.0.1:5555] "evalsha" "…" …
		_, rest, _ := strings.Cut(line, "[")
		source, rest, _ := strings.Cut(rest, "]")
		if strings.HasSuffix(source, " lua") {
			continue
		}
		cmd, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		cmd = strings.ToLower(strings.Trim(cmd, `"`))
		if cmd == "echo" && strings.Contains(rest, marker) {
			return counts
		}
		counts[cmd]++
	}
}

// TestRenewalRoundIsOneCommand counts, with MONITOR on a private server, the
// commands a member's renewal rounds send, with 16 and with 1024 claimed
// partitions: one EVALSHA per round, whatever the number of claims.
func TestRenewalRoundIsOneCommand(t *testing.T) {
	srv := redistest.StartServer(t)
	s := openStore(t, srv.URL())
	admin := adminClient(t, srv.URL())
	ctx := testCtx(t)
	if err := admin.Ping(ctx).Err(); err != nil { // connects before MONITOR starts
		t.Fatal(err)
	}
	const rounds = 10
	for _, n := range []int{16, 1024} {
		group := fmt.Sprintf("g%d", n)
		if _, err := s.Join(ctx, group, n, "m", time.Minute); err != nil {
			t.Fatal(err)
		}
		claims := make([]lease.Claim, n)
		for p := range n {
			rec, err := s.Acquire(ctx, lease.PartitionKey(group, p), "m", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			claims[p] = lease.Claim{Partition: p, Token: rec.Token}
		}
		// Load the script, so that the rounds measure EVALSHA alone.
		if _, err := s.RenewMember(ctx, group, "m", claims, time.Minute); err != nil {
			t.Fatal(err)
		}
		m := startMonitor(t, srv.Addr())
		renewRounds(t, s, group, claims, rounds)
		marker := fmt.Sprintf("lrtest-end-%d", n)
		if err := admin.Echo(ctx, marker).Err(); err != nil {
			t.Fatal(err)
		}
		counts := m.until(t, marker)
		m.conn.Close()
		// Time the rounds again without MONITOR, which slows scripts down.
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		took := renewRounds(t, s, group, claims, rounds)
		stats, err := admin.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d claims: %d rounds sent %v; %v per round; server: %s", n, rounds, counts,
			(took / rounds).Round(time.Microsecond), evalshaStats(stats))
		if got, want := counts["evalsha"], rounds; got != want {
			t.Errorf("%d claims: %d EVALSHA in %d rounds, want %d", n, got, rounds, want)
		}
		if total := sum(counts); total != rounds {
			t.Errorf("%d claims: %d commands in %d rounds (%v), want one per round", n, total, rounds, counts)
		}
	}
}

// renewRounds runs rounds renewal rounds of member m with claims, checks
// that each renewed every claim, and returns how long they took.
func renewRounds(t *testing.T, s *Store, group string, claims []lease.Claim, rounds int) time.Duration {
	t.Helper()
	start := time.Now()
	for range rounds {
		g, err := s.RenewMember(testCtx(t), group, "m", claims, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claims {
			if !g.Holds(c.Partition, "m", c.Token) {
				t.Fatalf("after a round, partition %d = %+v, want held by m", c.Partition, g.Leases[c.Partition])
			}
		}
	}
	return time.Since(start)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// evalshaStats is the commandstats line of EVALSHA.
func evalshaStats(info string) string {
	for line := range strings.Lines(info) {
		if strings.HasPrefix(line, "cmdstat_evalsha:") {
			return strings.TrimSpace(line)
		}
	}
	return "no EVALSHA"
}
