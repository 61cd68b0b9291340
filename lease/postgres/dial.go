package postgres

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

// newDialer returns the dialer for every connection to the server: TCP
// keepalive after keepAliveIdle and TCP_USER_TIMEOUT of userTimeout.
// pgx does not take libpq's keepalive parameters from the DSN.
func newDialer() *net.Dialer {
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
