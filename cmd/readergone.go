package cmd

import (
	"context"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// untilReaderGone returns a context that ends, with the cause
// errReaderGone, when out is a pipe whose reader has gone (watch | head
// -1): a command that writes only on events would otherwise notice that
// only at its next write, which may be hours away. For other outputs it
// returns ctx itself. Call stop when done.
func untilReaderGone(ctx context.Context, out io.Writer) (_ context.Context, stop func()) {
	o, ok := out.(output)
	if !ok {
		return ctx, func() {}
	}
	f, ok := o.w.(*os.File)
	if !ok {
		return ctx, func() {}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return ctx, func() {}
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		// The write end of a pipe polls POLLERR once no reader is left.
		// A poll with a timeout lets the goroutine end with ctx.
		for ctx.Err() == nil {
			var revents int16
			raw.Control(func(fd uintptr) {
				fds := []unix.PollFd{{Fd: int32(fd)}}
				if n, err := unix.Poll(fds, 500); err == nil && n > 0 {
					revents = fds[0].Revents
				}
			})
			if revents&(unix.POLLERR|unix.POLLHUP) != 0 {
				cancel(errReaderGone)
				return
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}
