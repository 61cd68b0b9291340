// Package fakeserver is a TCP listener for tests that plays a store's
// server badly: each accepted connection is handed to a function that
// speaks as much of the protocol as the test needs, and then lies.
package fakeserver

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Start listens on a loopback port and runs handle, on a goroutine of its
// own, for every connection accepted, closing the connection when handle
// returns. It returns the listening address, host:port. At cleanup it
// stops listening, closes every connection and waits for every handle to
// return.
func Start(tb testing.TB, handle func(c net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("fakeserver: listen: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards conns
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				handle(c)
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// AnswerEach writes reply after each read of the client's, until the
// client closes: a server that answers every request the same way.
func AnswerEach(reply []byte) func(net.Conn) {
	return func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}
}
