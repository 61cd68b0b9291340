package chaos

import (
	"bufio"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// event is one line of the event log.
type event struct {
	kind  string
	at    int64 // wall clock, ns
	pid   int
	token int64
	part  string // the partition, "" for one name
	kv    map[string]string
	line  int // 1-based line number: the order of the appends
}

func (e event) time() time.Time { return time.Unix(0, e.at) }

func (e event) int(key string) int64 {
	n, _ := strconv.ParseInt(e.kv[key], 10, 64)
	return n
}

// parseEvent parses "KIND at=NS pid=P token=T [part=N] k=v ...".
func parseEvent(line string) (event, bool) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return event{}, false
	}
	e := event{kind: f[0], kv: make(map[string]string, len(f)-1)}
	for _, p := range f[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return event{}, false
		}
		e.kv[k] = v
	}
	var err1, err2 error
	e.at, err1 = strconv.ParseInt(e.kv["at"], 10, 64)
	e.token, err2 = strconv.ParseInt(e.kv["token"], 10, 64)
	pid, err3 := strconv.Atoi(e.kv["pid"])
	e.pid = pid
	e.part = e.kv["part"]
	return e, err1 == nil && err2 == nil && err3 == nil
}

// eventLog follows the event log file while the run lasts.
type eventLog struct {
	path string

	mu     sync.Mutex // guards the fields below
	events []event
	latest map[string]event // the latest start event of each partition ("" for the one name)
	bad    []string         // lines that did not parse
	off    int64
	part   string // an incomplete last line
	lines  int
}

// refresh reads what was appended since the last call.
func (l *eventLog) refresh() {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Open(l.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		s, err := r.ReadString('\n')
		l.off += int64(len(s))
		if err != nil {
			l.part += s
			return
		}
		s = l.part + s
		l.part = ""
		l.lines++
		if e, ok := parseEvent(strings.TrimSuffix(s, "\n")); ok {
			toHarnessPids(&e)
			e.line = l.lines
			l.events = append(l.events, e)
			if e.kind == "start" {
				if l.latest == nil {
					l.latest = map[string]event{}
				}
				l.latest[e.part] = e
			}
		} else {
			l.bad = append(l.bad, s)
		}
	}
}

// snapshot returns the events read so far, refreshed.
func (l *eventLog) snapshot() []event {
	l.refresh()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events[:len(l.events):len(l.events)]
}

// latestStarts returns the latest start event of each partition ("" for
// the one name), refreshed.
func (l *eventLog) latestStarts() map[string]event {
	l.refresh()
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.latest)
}

// waitEvent polls until pred matches an event at index ≥ from, or the
// deadline. It returns the event and whether one matched.
func (l *eventLog) waitEvent(from int, deadline time.Time, pred func(event) bool) (event, bool) {
	for {
		evs := l.snapshot()
		for i := from; i < len(evs); i++ {
			if pred(evs[i]) {
				return evs[i], true
			}
		}
		from = len(evs)
		if time.Now().After(deadline) {
			return event{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
