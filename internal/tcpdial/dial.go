// Package tcpdial dials the stores' TCP connections so that a partitioned
// connection fails in seconds: TCP keepalive and TCP_USER_TIMEOUT, which
// the database drivers do not set from their DSNs.
package tcpdial

import (
	"net"
	"time"
)

// Timing of the client side of TCP, so that a partitioned connection fails
// in seconds rather than after the kernel's defaults (hours of idle before
// keepalive, about 15 minutes of retransmission).
const (
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	userTimeout       = 10 * time.Second
)

// New returns the dialer for every connection to a store's server: TCP
// keepalive after 5s idle, probed every 5s, and TCP_USER_TIMEOUT of 10s.
func New() *net.Dialer {
	return &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     keepAliveIdle,
			Interval: keepAliveInterval,
			Count:    keepAliveCount,
		},
		Control: setUserTimeout,
	}
}
