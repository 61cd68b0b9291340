package samehost

import (
	"errors"
	"strings"
	"testing"
)

var sample = Where{Boot: "0f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4a", PIDNS: 4026531836,
	Pid: 1200, Start: 987654, Child: 1210, ChildStart: 987660, Pgid: 1210}

const sampleText = "v1 boot=0f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4a pidns=4026531836 pid=1200 start=987654 child=1210 child_start=987660 pgid=1210"

// sampleEnd is sample with an EndSignal: the v3 form.
var sampleEnd = func() Where {
	w := sample
	w.EndIno, w.EndPath = 123456, "/run/user/1000/leaderrun/end-4026531836-1200-987654-1"
	return w
}()

const sampleEndText = "v3 boot=0f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4a pidns=4026531836 pid=1200 start=987654 child=1210 child_start=987660 pgid=1210 end_ino=123456 end_path=/run/user/1000/leaderrun/end-4026531836-1200-987654-1"

// samplePipeText is sample as an older leaderrun wrote it with its end
// signal, a pipe that followers opened through /proc/PID/fd.
const samplePipeText = "v2 boot=0f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4a pidns=4026531836 pid=1200 start=987654 child=1210 child_start=987660 pgid=1210 end_fd=7 end_ino=123456"

func TestWhereRoundTrip(t *testing.T) {
	if got, want := sampleEnd.String(), sampleEndText; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if w, err := Parse(sampleEndText); err != nil || w != sampleEnd {
		t.Errorf("Parse(%q) = %+v, %v; want %+v", sampleEndText, w, err, sampleEnd)
	}
	// An older holder's record still names the holder and its command;
	// its end signal, opened only through /proc/PID/fd, is dropped.
	if w, err := Parse(samplePipeText); err != nil || w != sample {
		t.Errorf("Parse(%q) = %+v, %v; want %+v (no end signal)", samplePipeText, w, err, sample)
	}
	long := sampleEnd
	long.EndPath = "/" + strings.Repeat("x", maxEndPath-1)
	if got, err := Parse(long.String()); err != nil || got != long {
		t.Errorf("Parse(%q) = %+v, %v; want %+v", long.String(), got, err, long)
	}

	if got, want := sample.String(), sampleText; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	w, err := Parse(sampleText)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if w != sample {
		t.Errorf("Parse = %+v, want %+v", w, sample)
	}
	edge := Where{Boot: sample.Boot, PIDNS: 1<<64 - 1, Pid: 1, Start: 0, Child: maxPid, ChildStart: 1<<64 - 1, Pgid: maxPid}
	if got, err := Parse(edge.String()); err != nil || got != edge {
		t.Errorf("Parse(%q) = %+v, %v; want %+v", edge.String(), got, err, edge)
	}
}

func TestParseRefuses(t *testing.T) {
	swap := func(old, new string) string { return strings.Replace(sampleText, old, new, 1) }
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"version only", "v1"},
		{"other version", swap("v1 ", "v4 ")},
		{"v3 without its end signal", swap("v1 ", "v3 ")},
		{"v2 without its end signal", swap("v1 ", "v2 ")},
		{"v1 with an end signal", sampleText + " end_ino=123456 end_path=/run/x"},
		{"v3 with a v2 end signal", strings.Replace(samplePipeText, "v2 ", "v3 ", 1)},
		{"v2 with a v3 end signal", strings.Replace(sampleEndText, "v3 ", "v2 ", 1)},
		{"v3 with inode 0", strings.Replace(sampleEndText, "end_ino=123456", "end_ino=0", 1)},
		{"v3 with end fields swapped", strings.Replace(sampleEndText, "end_ino=123456 end_path=/run/user/1000/leaderrun/end-4026531836-1200-987654-1",
			"end_path=/run/user/1000/leaderrun/end-4026531836-1200-987654-1 end_ino=123456", 1)},
		{"v3 with an empty path", strings.Replace(sampleEndText, "end_path=/run/user/1000/leaderrun/end-4026531836-1200-987654-1", "end_path=", 1)},
		{"v3 with a relative path", strings.Replace(sampleEndText, "end_path=/run/", "end_path=run/", 1)},
		{"v3 with a path that climbs", strings.Replace(sampleEndText, "end_path=/run/", "end_path=/run/../dev/", 1)},
		{"v3 with an unclean path", strings.Replace(sampleEndText, "end_path=/run/", "end_path=/run//", 1)},
		{"v3 with a path ending in a slash", sampleEndText + "/"},
		{"v3 with the root as path", strings.Replace(sampleEndText, "end_path=/run/user/1000/leaderrun/end-4026531836-1200-987654-1", "end_path=/", 1)},
		{"v3 with a control character in the path", strings.Replace(sampleEndText, "end_path=/run/", "end_path=/r\x1bun/", 1)},
		{"v3 with a non-ASCII path", strings.Replace(sampleEndText, "end_path=/run/", "end_path=/rün/", 1)},
		{"v3 with a path above its limit", strings.Replace(sampleEndText, "end_path=/run/", "end_path=/"+strings.Repeat("x", maxEndPath)+"/", 1)},
		{"v2 with inode 0", strings.Replace(samplePipeText, "end_ino=123456", "end_ino=0", 1)},
		{"v2 with a descriptor above the kernel's limit", strings.Replace(samplePipeText, "end_fd=7", "end_fd=1048576", 1)},
		{"v2 with end fields swapped", strings.Replace(samplePipeText, "end_fd=7 end_ino=123456", "end_ino=123456 end_fd=7", 1)},
		{"v2 with a negative descriptor", strings.Replace(samplePipeText, "end_fd=7", "end_fd=-1", 1)},
		{"no version", strings.TrimPrefix(sampleText, "v1 ")},
		{"uppercase version", swap("v1 ", "V1 ")},
		{"missing field", swap(" pgid=1210", "")},
		{"extra field", sampleText + " cgroup=/x"},
		{"trailing space", sampleText + " "},
		{"leading space", " " + sampleText},
		{"double space", swap(" pid=", "  pid=")},
		{"tab", swap(" pid=", "\tpid=")},
		{"newline", sampleText + "\n"},
		{"fields swapped", swap("pid=1200 start=987654", "start=987654 pid=1200")},
		{"key renamed", swap("pgid=", "pgrp=")},
		{"key repeated", swap("start=987654", "pid=987654")},
		{"no equals", swap("pid=1200", "pid1200")},
		{"two equals", swap("pid=1200", "pid==1200")},
		{"uppercase boot id", swap("0f3c2a9e", "0F3C2A9E")},
		{"short boot id", swap("0f3c2a9e-", "0f3c2a9-")},
		{"boot id without dashes", swap("0f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4a", "0f3c2a9e06d1b04c8e09a7f05b2e1d0c3f4a")},
		{"boot id with braces", swap("0f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4a", "{f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4}")},
		{"empty boot id", swap("boot=0f3c2a9e-6d1b-4c8e-9a7f-5b2e1d0c3f4a", "boot=")},
		{"negative pid", swap("pid=1200", "pid=-1200")},
		{"plus sign", swap("pid=1200", "pid=+1200")},
		{"leading zero", swap("pid=1200", "pid=01200")},
		{"pid zero", swap("pid=1200", "pid=0")},
		{"pid above the kernel's limit", swap("pid=1200", "pid=4194305")},
		{"pid overflowing int64", swap("pid=1200", "pid=99999999999999999999")},
		{"start overflowing uint64", swap("start=987654", "start=18446744073709551616")},
		{"hex start", swap("start=987654", "start=0xf")},
		{"pidns zero", swap("pidns=4026531836", "pidns=0")},
		{"empty pgid", swap("pgid=1210", "pgid=")},
		{"group -1 (every process)", swap("pgid=1210", "pgid=-1")},
		{"command is the holder", swap("child=1210", "child=1200")},
		{"unicode digits", swap("pid=1200", "pid=١٢٠٠")},
		{"NUL", swap("pid=1200", "pid=1200\x00")},
		{"too long", sampleText + strings.Repeat("x", maxWhere)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w, err := Parse(tc.in); err == nil {
				t.Errorf("Parse(%q) = %+v, want an error", tc.in, w)
			}
		})
	}
	if _, err := Parse(strings.Replace(sampleText, "v1 ", "v4 ", 1)); !errors.Is(err, ErrVersion) {
		t.Errorf("Parse of a v4 record = %v, want ErrVersion", err)
	}
}

// FuzzParse checks that Parse accepts only what String writes (or, for
// the v2 form, what String wrote before it, less its end signal): whatever
// it accepts encodes back to the same text.
func FuzzParse(f *testing.F) {
	f.Add(sampleText)
	f.Add(sampleEndText)
	f.Add(samplePipeText)
	f.Add(strings.Replace(sampleText, "pid=1200", "pid=01200", 1))
	f.Fuzz(func(t *testing.T, s string) {
		w, err := Parse(s)
		if err != nil {
			return
		}
		if v1, ok := strings.CutPrefix(s, "v2 "); ok {
			i := strings.Index(v1, " end_fd=")
			if w.EndIno != 0 || w.EndPath != "" || i < 0 {
				t.Fatalf("Parse(%q) = %+v; want the v2 end signal dropped", s, w)
			}
			s = "v1 " + v1[:i]
		}
		if got := w.String(); got != s {
			t.Errorf("Parse(%q) = %+v, which encodes as %q", s, w, got)
		}
	})
}
