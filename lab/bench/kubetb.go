package main

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// benchTB is the testing.TB that kubetest.Start takes, for a program that
// is not a test: its temp dirs are made under dir, its cleanups run when
// cleanup is called, and Fatal and Skip panic with a tbStop, which
// startKube recovers into an error. Every other method is the nil
// embedded interface's: calling one panics, and startKube recovers that
// too.
type benchTB struct {
	testing.TB
	dir      string
	cleanups []func()
}

// tbStop is a Fatal's or Skip's message.
type tbStop string

func (t *benchTB) Helper() {}

func (t *benchTB) TempDir() string {
	d, err := os.MkdirTemp(t.dir, "kubetest-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (t *benchTB) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *benchTB) Fatal(args ...any)                 { panic(tbStop(fmt.Sprint(args...))) }
func (t *benchTB) Fatalf(format string, args ...any) { panic(tbStop(fmt.Sprintf(format, args...))) }
func (t *benchTB) Skip(args ...any)                  { panic(tbStop(fmt.Sprint(args...))) }
func (t *benchTB) Skipf(format string, args ...any)  { panic(tbStop(fmt.Sprintf(format, args...))) }

// cleanup runs the cleanups registered so far, last first.
func (t *benchTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}

// startKube starts a kube-apiserver and its etcd with their files under
// dir. stop stops them; it is nil when err is not.
func startKube(dir string) (srv *kubetest.Server, stop func(), err error) {
	tb := &benchTB{dir: dir}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		tb.cleanup()
		srv, stop = nil, nil
		if msg, ok := r.(tbStop); ok {
			err = errors.New(string(msg))
		} else {
			err = fmt.Errorf("kubetest.Start: %v", r)
		}
	}()
	srv = kubetest.Start(tb)
	return srv, tb.cleanup, nil
}
