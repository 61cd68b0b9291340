// Package doclinks checks the relative links of Markdown files: each link
// to a file must name one that exists, and each #anchor a heading of the
// file it points into, as GitHub names the heading (its slug). Links with a
// scheme (https:, man:, mailto:) are not followed.
//
// It reads the Markdown GitHub renders closely enough for this repository's
// pages: ATX headings (# Title), inline links [text](target "title"),
// reference definitions [label]: target, and id or name attributes of HTML
// anchors. Fenced code blocks, indented code blocks (indented four spaces
// after a blank line) and code spans are not text, and their brackets are
// not links.
package doclinks

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Broken is a link that leads nowhere.
type Broken struct {
	File   string // the file the link is in, relative to the root given to Check
	Line   int    // its line, from 1
	Target string // the link as written
	Why    string // what is missing
}

func (b Broken) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", b.File, b.Line, b.Target, b.Why)
}

// Check reads each of files (paths relative to root, slash-separated) and
// returns its broken relative links, in file and line order. An error is a
// file of files that cannot be read.
func Check(root string, files []string) ([]Broken, error) {
	c := checker{root: root, anchors: map[string]map[string]bool{}}
	var broken []Broken
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		for _, l := range Links(string(text)) {
			if why := c.resolve(f, l.Target); why != "" {
				broken = append(broken, Broken{File: f, Line: l.Line, Target: l.Target, Why: why})
			}
		}
	}
	return broken, nil
}

type checker struct {
	root    string
	anchors map[string]map[string]bool // by file, relative to root; nil for a file that does not exist
}

// resolve returns why target, a link in file, leads nowhere, or "".
func (c *checker) resolve(file, target string) string {
	if hasScheme(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	path, fragment, _ := strings.Cut(target, "#")
	path, err := url.PathUnescape(path)
	if err != nil {
		return "not a valid path: " + err.Error()
	}
	dest := file
	if path != "" {
		if strings.HasPrefix(path, "/") {
			return "an absolute path: GitHub reads it from the repository's root, a package's copy from /"
		}
		dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "outside the repository"
		}
		if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(dest))); err != nil {
			return "no such file " + dest
		}
	}
	if fragment == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	anchors, err := c.anchorsOf(dest)
	if err != nil {
		return err.Error()
	}
	if !anchors[fragment] {
		return fmt.Sprintf("no heading or anchor %q in %s", fragment, dest)
	}
	return ""
}

func (c *checker) anchorsOf(file string) (map[string]bool, error) {
	if a, ok := c.anchors[file]; ok {
		return a, nil
	}
	text, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	a := Anchors(string(text))
	c.anchors[file] = a
	return a, nil
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func hasScheme(target string) bool { return scheme.MatchString(target) }

// Link is a link target found in Markdown text.
type Link struct {
	Line   int
	Target string
}

var (
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)`)
	refDef     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlAnchor = regexp.MustCompile(`<a\s[^>]*\b(?:id|name)="([^"]+)"`)
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// Links returns the targets of text's links, outside code.
func Links(text string) []Link {
	var links []Link
	eachTextLine(text, func(n int, line string) {
		line = withoutCodeSpans(line)
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, Link{n, strings.Trim(m[1], "<>")})
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			links = append(links, Link{n, strings.Trim(m[1], "<>")})
		}
	})
	return links
}

// Anchors returns the fragments that lead into text: its headings' slugs,
// numbered as GitHub numbers repeated ones (name, name-1, name-2), and its
// HTML anchors' ids and names.
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	eachTextLine(text, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors
}

// eachTextLine calls f with each line of text that is not in a code block,
// and its number from 1.
func eachTextLine(text string, f func(n int, line string)) {
	fence := ""   // the fence that opened the code block we are in
	code := false // in an indented code block
	blank := true // the previous line was blank (or there was none)
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		case strings.TrimSpace(line) == "":
		case (blank || code) && (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")):
			code = true
		default:
			code = false
			f(i+1, line)
		}
		blank = strings.TrimSpace(line) == ""
	}
}

// withoutCodeSpans blanks line's code spans.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		ticks := line[i : i+n]
		end := strings.Index(line[i+n:], ticks)
		if end < 0 { // unclosed: the backticks are text
			b.WriteString(ticks)
			line = line[i+n:]
			continue
		}
		line = line[i+n+end+n:]
	}
}

var (
	inlineLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag        = regexp.MustCompile(`<[^>]+>`)
)

// Slug is the anchor GitHub gives a heading: its text without markup, in
// lower case, with every character but letters, digits, marks, '-', '_'
// and spaces dropped, and each space made a '-'.
func Slug(heading string) string {
	text := inlineLinkText.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
