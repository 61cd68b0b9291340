package redis

import (
	"fmt"
	"net"
	"syscall"
)

// Bounds on what one reply may announce. go-redis allocates what a reply's
// header announces before reading it: a bulk string's length, an
// aggregate's element count. A server that announces 2^63 bytes (broken,
// or not a Redis server at all) made it panic (makeslice: len out of
// range), and one that announces a gigabyte makes it allocate one. No
// reply of leaderrun's comes near these.
const (
	// maxBulk bounds a bulk string's (or verbatim string's, or blob
	// error's) length.
	maxBulk = 64 << 20
	// maxElems bounds an aggregate's element count; go-redis allocates
	// 16 bytes per element up front, so this too is 64 MiB.
	maxElems = 4 << 20
	// maxHeader bounds a header line (the type byte, a length, CRLF).
	maxHeader = 32
)

// ReplyTooLargeError is a reply whose header announces more than leaderrun
// accepts; the connection is useless afterwards.
type ReplyTooLargeError struct {
	Type  byte  // the RESP type byte: '$', '*', …
	Count int64 // what the header announces
	Limit int64
}

func (e *ReplyTooLargeError) Error() string {
	what := "elements"
	if isBulk(e.Type) {
		what = "bytes"
	}
	return fmt.Sprintf("redis server's reply announces %d %s (%q header), more than the %d leaderrun accepts: not a Redis server, or a broken one",
		e.Count, what, e.Type, e.Limit)
}

// boundedConn checks the RESP replies read from it as they pass: a bulk
// length or element count out of bounds, or a malformed header, fails the
// Read that carries it (and every later one) instead of reaching go-redis's
// reader.
type boundedConn struct {
	net.Conn
	r   respScanner
	err error // sticky: the first violation
}

// bounded wraps c. It keeps what go-redis's pool looks for in a
// connection to check an idle one's health without reading it (a peek at
// the socket): SyscallConn where c has it, and NetConn.
func bounded(c net.Conn) net.Conn {
	b := &boundedConn{Conn: c}
	if _, ok := c.(syscall.Conn); ok {
		return boundedSysConn{b}
	}
	return b
}

// NetConn returns the connection underneath.
func (c *boundedConn) NetConn() net.Conn { return c.Conn }

// boundedSysConn is a boundedConn over a connection with a file
// descriptor.
type boundedSysConn struct{ *boundedConn }

func (c boundedSysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

func (c *boundedConn) Read(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(b)
	if serr := c.r.scan(b[:n]); serr != nil {
		c.err = serr
		return 0, serr
	}
	return n, err
}

// respScanner follows the RESP2/RESP3 stream byte by byte: at each value's
// start it reads the type byte; for a length-prefixed type it parses the
// header line and skips the payload; for any other it skips the line.
// Aggregates need no nesting state: their elements are values in turn.
type respScanner struct {
	state   int
	typ     byte
	header  []byte // digits (and sign) of the current header line
	payload int64  // bytes left of a bulk payload, its CRLF included
}

const (
	atStart   = iota // at the start of a value
	inHeader         // in a length header line, before CR LF
	inLine           // in a line that is skipped (simple string, error, number, …)
	inPayload        // in a bulk payload
)

func isBulk(t byte) bool { return t == '$' || t == '=' || t == '!' }

func isAggregate(t byte) bool {
	switch t {
	case '*', '%', '~', '>', '|':
		return true
	}
	return false
}

func (s *respScanner) scan(b []byte) error {
	for i := 0; i < len(b); i++ {
		switch s.state {
		case atStart:
			s.typ = b[i]
			s.header = s.header[:0]
			if isBulk(s.typ) || isAggregate(s.typ) {
				s.state = inHeader
			} else {
				s.state = inLine
			}
		case inLine:
			if b[i] == '\n' {
				s.state = atStart
			}
		case inHeader:
			if b[i] != '\n' {
				if len(s.header) >= maxHeader {
					return fmt.Errorf("redis server's reply has a %q header longer than %d bytes: not a Redis server, or a broken one", s.typ, maxHeader)
				}
				s.header = append(s.header, b[i])
				continue
			}
			n, err := s.count()
			if err != nil {
				return err
			}
			s.state = atStart
			if isBulk(s.typ) && n >= 0 {
				s.payload, s.state = n+2, inPayload
			}
		case inPayload:
			skip := min(int64(len(b)-i), s.payload)
			s.payload -= skip
			i += int(skip) - 1
			if s.payload == 0 {
				s.state = atStart
			}
		}
	}
	return nil
}

// count parses the header line's number and checks it against the type's
// bound; -1 (null) is allowed.
func (s *respScanner) count() (int64, error) {
	h := s.header
	if len(h) > 0 && h[len(h)-1] == '\r' {
		h = h[:len(h)-1]
	}
	limit := int64(maxElems)
	if isBulk(s.typ) {
		limit = maxBulk
	}
	var n int64
	neg := len(h) > 0 && h[0] == '-'
	digits := h
	if neg {
		digits = h[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return 0, fmt.Errorf("redis server's reply has a malformed %q header %q: not a Redis server, or a broken one", s.typ, h)
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, fmt.Errorf("redis server's reply has a malformed %q header %q: not a Redis server, or a broken one", s.typ, h)
		}
		if n > (1<<63-1-int64(d-'0'))/10 {
			return 0, &ReplyTooLargeError{Type: s.typ, Count: 1<<63 - 1, Limit: limit}
		}
		n = n*10 + int64(d-'0')
	}
	if neg {
		if n != 1 {
			return 0, fmt.Errorf("redis server's reply has a %q header of -%d: not a Redis server, or a broken one", s.typ, n)
		}
		return -1, nil
	}
	if n > limit {
		return 0, &ReplyTooLargeError{Type: s.typ, Count: n, Limit: limit}
	}
	return n, nil
}
