// Package lazyre is a regular expression compiled on its first use rather
// than at program start. Go runs the initialisers of every linked package
// in every leaderrun process, a client command such as step-down as much
// as a replica, and a pattern compiled there costs each start the
// compilation and the memory it touches, for DSNs and messages that the
// process never parses.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a pattern compiled, with regexp.MustCompile, by its first use.
type Regexp struct {
	re func() *regexp.Regexp
}

// New returns expr, to be compiled when first used; an invalid expr
// panics then.
func New(expr string) *Regexp {
	return &Regexp{re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }

func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}

func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }
