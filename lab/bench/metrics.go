package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// metric is one sample of the Prometheus text format.
type metric struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the Prometheus text exposition format: every sample
// line, comments skipped. Label values may hold escaped quotes.
func parseMetrics(r io.Reader) ([]metric, error) {
	var out []metric
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		m := metric{labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i < 0 {
			continue
		} else {
			m.name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			rest = rest[1:]
			for {
				rest = strings.TrimLeft(rest, ", ")
				if strings.HasPrefix(rest, "}") {
					rest = rest[1:]
					break
				}
				k, v, ok := strings.Cut(rest, `="`)
				if !ok {
					return nil, fmt.Errorf("malformed metric line %q", line)
				}
				var val strings.Builder
				i := 0
				for ; i < len(v) && v[i] != '"'; i++ {
					if v[i] == '\\' && i+1 < len(v) {
						i++
					}
					val.WriteByte(v[i])
				}
				if i >= len(v) {
					return nil, fmt.Errorf("malformed metric line %q", line)
				}
				m.labels[k] = val.String()
				rest = v[i+1:]
			}
		}
		f := strings.Fields(rest)
		if len(f) < 1 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m.value = v
		out = append(out, m)
	}
	return out, sc.Err()
}

// scrape reads http://addr/metrics.
func scrape(addr string) ([]metric, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// sumMetric adds up every sample of name whose labels include want.
func sumMetric(ms []metric, name string, want map[string]string) float64 {
	var s float64
next:
	for _, m := range ms {
		if m.name != name {
			continue
		}
		for k, v := range want {
			if m.labels[k] != v {
				continue next
			}
		}
		s += m.value
	}
	return s
}

// histogram is a Prometheus histogram's cumulative bucket counts.
type histogram struct {
	Bounds []float64 // upper bounds in seconds, ascending, +Inf last
	Counts []float64 // cumulative
}

// jsonHistogram is histogram in JSON, which has no +Inf: bounds as
// Prometheus writes them ("0.05", "+Inf").
type jsonHistogram struct {
	Le     []string
	Counts []float64
}

func (h histogram) MarshalJSON() ([]byte, error) {
	j := jsonHistogram{Counts: h.Counts}
	for _, b := range h.Bounds {
		j.Le = append(j.Le, strconv.FormatFloat(b, 'g', -1, 64))
	}
	return json.Marshal(j)
}

func (h *histogram) UnmarshalJSON(b []byte) error {
	var j jsonHistogram
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	h.Bounds, h.Counts = nil, j.Counts
	for _, le := range j.Le {
		v, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return err
		}
		h.Bounds = append(h.Bounds, v)
	}
	return nil
}

// histogramOf collects the buckets of histogram name (name_bucket).
func histogramOf(ms []metric) func(name string) histogram {
	return func(name string) histogram {
		byLe := map[float64]float64{}
		for _, m := range ms {
			if m.name != name+"_bucket" {
				continue
			}
			le, err := strconv.ParseFloat(m.labels["le"], 64)
			if err != nil {
				continue
			}
			byLe[le] += m.value
		}
		var h histogram
		for le := range byLe {
			h.Bounds = append(h.Bounds, le)
		}
		slices.Sort(h.Bounds)
		for _, le := range h.Bounds {
			h.Counts = append(h.Counts, byLe[le])
		}
		return h
	}
}

// sub is h − o, bucket by bucket (o read earlier from the same processes).
func (h histogram) sub(o histogram) histogram {
	out := histogram{Bounds: h.Bounds, Counts: slices.Clone(h.Counts)}
	for i, le := range h.Bounds {
		if j := slices.Index(o.Bounds, le); j >= 0 {
			out.Counts[i] -= o.Counts[j]
		}
	}
	return out
}

// add is h + o, bucket by bucket (the same buckets).
func (h histogram) add(o histogram) histogram {
	if len(h.Bounds) == 0 {
		return o
	}
	out := histogram{Bounds: h.Bounds, Counts: slices.Clone(h.Counts)}
	for i, le := range h.Bounds {
		if j := slices.Index(o.Bounds, le); j >= 0 {
			out.Counts[i] += o.Counts[j]
		}
	}
	return out
}

// N is the number of observations.
func (h histogram) N() float64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// quantileBound is the upper bound of the bucket that holds quantile q:
// the value is at most that (+Inf when it is in the last bucket).
func (h histogram) quantileBound(q float64) float64 {
	n := h.N()
	if n == 0 {
		return math.NaN()
	}
	for i, c := range h.Counts {
		if c >= q*n {
			return h.Bounds[i]
		}
	}
	return math.Inf(1)
}

// fractionAtMost is the share of observations in buckets up to bound le
// (an existing bucket bound).
func (h histogram) fractionAtMost(le float64) float64 {
	n := h.N()
	if n == 0 {
		return math.NaN()
	}
	for i, b := range h.Bounds {
		if b == le {
			return h.Counts[i] / n
		}
	}
	return math.NaN()
}
