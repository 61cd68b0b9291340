package supervise

import (
	"embed"
	"io"
)

// initProgDir holds the leaderrun-init program that `make build` puts
// there (see initprog.go), or only its README.
//
//go:embed all:initprog/arm64
var initProgDir embed.FS

func init() {
	initProgram = func() (io.ReadCloser, error) { return initProgDir.Open("initprog/arm64/leaderrun-init") }
}
