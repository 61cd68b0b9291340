//go:build linux

package samehost

import (
	"os"
	"testing"
)

func TestHidden(t *testing.T) {
	for opts, want := range map[string]bool{
		"rw":                          false,
		"rw,hidepid=0":                false,
		"rw,hidepid=off":              false,
		"rw,nosuid,hidepid=2,gid=100": true,
		"rw,hidepid=1":                true,
		"rw,hidepid=invisible":        true,
		"rw,hidepid=noaccess":         true,
		"rw,hidepid=ptraceable":       true,
		"rw,subset=pid":               false,
	} {
		if got := hidden(opts); got != want {
			t.Errorf("hidden(%q) = %v, want %v", opts, got, want)
		}
	}
}

func TestThisProcess(t *testing.T) {
	s, err := thisProcess()
	if err != nil {
		t.Fatalf("thisProcess: %v", err)
	}
	if s.Pid != os.Getpid() || s.Start == 0 || s.PIDNS == 0 || !isBootID(s.boot) {
		t.Errorf("thisProcess = %+v", s)
	}
	if _, err := procOptions(); err != nil {
		t.Errorf("procOptions: %v", err)
	}
}
