package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"time"
)

// mysqlCounter is a TCP proxy in front of the MariaDB server that counts
// the commands its clients send, by command: every client packet that
// starts a command (sequence id 0 after the handshake) names it in its
// first byte. One proxy fronts one group of replicas, so its counts are
// that group's alone, on a server that other clients share.
type mysqlCounter struct {
	ln     net.Listener
	target string

	mu     sync.Mutex // guards counts, kinds and conns
	counts map[string]int64
	kinds  map[string]int64 // COM_QUERY by the statement's first words
	conns  []net.Conn
}

// mysqlCommands names the command bytes of the client/server protocol.
var mysqlCommands = map[byte]string{
	0x01: "COM_QUIT", 0x02: "COM_INIT_DB", 0x03: "COM_QUERY", 0x0e: "COM_PING",
	0x11: "COM_CHANGE_USER", 0x16: "COM_STMT_PREPARE", 0x17: "COM_STMT_EXECUTE",
	0x19: "COM_STMT_CLOSE", 0x1a: "COM_STMT_RESET", 0x1f: "COM_RESET_CONNECTION",
}

func startMySQLCounter(target string) (*mysqlCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &mysqlCounter{ln: ln, target: target, counts: map[string]int64{}, kinds: map[string]int64{}}
	go c.accept()
	return c, nil
}

// addr is the proxy's listening address, host:port.
func (c *mysqlCounter) addr() string { return c.ln.Addr().String() }

func (c *mysqlCounter) accept() {
	for {
		cl, err := c.ln.Accept()
		if err != nil {
			return
		}
		srv, err := net.DialTimeout("tcp", c.target, 5*time.Second)
		if err != nil {
			cl.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, cl, srv)
		c.mu.Unlock()
		go func() {
			io.Copy(cl, srv)
			cl.Close()
		}()
		go func() {
			c.forward(srv, cl)
			srv.Close()
		}()
	}
}

// forward copies client packets to the server, counting commands. The
// first client packet (sequence id 1: the handshake response) and the
// rest of the authentication exchange have sequence ids above 0.
func (c *mysqlCounter) forward(dst io.Writer, src io.Reader) {
	r := bufio.NewReaderSize(src, 64<<10)
	hdr := make([]byte, 4)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(append(hdr[:3:3], 0)))
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		if hdr[3] == 0 && n > 0 {
			name, ok := mysqlCommands[payload[0]]
			if !ok {
				name = fmt.Sprintf("COM_0x%02x", payload[0])
			}
			c.mu.Lock()
			c.counts[name]++
			if payload[0] == 0x03 {
				c.kinds[statementKind(payload[1:])]++
			}
			c.mu.Unlock()
		}
		if _, err := dst.Write(append(hdr, payload...)); err != nil {
			return
		}
		hdr = make([]byte, 4)
	}
}

// snapshot returns the counts so far: by command, and COM_QUERY by kind.
func (c *mysqlCounter) snapshot() (commands, kinds map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts), maps.Clone(c.kinds)
}

// statementKind names a statement by its first words ("SELECT GET_LOCK",
// "INSERT INTO leaderrun_leases"), for telling apart what a store sends.
func statementKind(q []byte) string {
	if len(q) > 200 {
		q = q[:200]
	}
	var words []string
	for _, f := range strings.Fields(string(q)) {
		f, _, cut := strings.Cut(f, "(")
		if f != "" {
			words = append(words, strings.Trim(f, "`"))
		}
		if cut || len(words) == 3 {
			break
		}
	}
	return strings.Join(words, " ")
}

func (c *mysqlCounter) close() {
	c.ln.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
}

// redisMonitor counts the commands the Redis server executes for each
// client address, from the server's own MONITOR feed. Commands that
// scripts run inside the server are shown as "lua" and not counted: a
// script is counted once, as the EVALSHA that ran it.
type redisMonitor struct {
	conn net.Conn

	mu     sync.Mutex // guards counts
	counts map[string]map[string]int64
	err    error
}

func startRedisMonitor(ctx context.Context, addr string) (*redisMonitor, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := writeRESP(conn, "MONITOR"); err != nil {
		conn.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 256<<10)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if ok, err := readRESPText(r); err != nil || ok != "OK" {
		conn.Close()
		return nil, fmt.Errorf("MONITOR: %q %v", ok, err)
	}
	conn.SetReadDeadline(time.Time{})
	m := &redisMonitor{conn: conn, counts: map[string]map[string]int64{}}
	go m.read(r)
	return m, nil
}

// read parses lines such as
//
//	+1700000000.123456 [0 127.0.0.1:42768] "EVALSHA" "…" …
func (m *redisMonitor) read(r *bufio.Reader) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			return
		}
		_, rest, ok := strings.Cut(line, " [")
		if !ok {
			continue
		}
		who, rest, ok := strings.Cut(rest, "] ")
		if !ok {
			continue
		}
		_, addr, ok := strings.Cut(who, " ")
		if !ok || addr == "lua" {
			continue
		}
		cmd := rest
		if strings.HasPrefix(cmd, `"`) {
			cmd, _, _ = strings.Cut(cmd[1:], `"`)
		}
		cmd = strings.ToUpper(cmd)
		m.mu.Lock()
		if m.counts[addr] == nil {
			m.counts[addr] = map[string]int64{}
		}
		m.counts[addr][cmd]++
		m.mu.Unlock()
	}
}

// of sums the counts of the given client addresses, by command.
func (m *redisMonitor) of(addrs map[string]bool) map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for a := range addrs {
		for cmd, n := range m.counts[a] {
			out[cmd] += n
		}
	}
	return out
}

func (m *redisMonitor) close() { m.conn.Close() }

// diffCounts is b − a, key by key, without zero entries.
func diffCounts(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func sumCounts(m map[string]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}
