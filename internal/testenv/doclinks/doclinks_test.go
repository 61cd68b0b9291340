package doclinks

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The repository's pages: the README, CONTRIBUTING.md, BENCHMARKS.md and
// every page under docs/ and packaging/ (the compose example's README).
func pages(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md", "BENCHMARKS.md"}
	for _, dir := range []string{"docs", "packaging"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
				return err
			}
			rel, err := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestRepositoryLinks: every relative link and #anchor of the README,
// CONTRIBUTING.md, BENCHMARKS.md and the pages under docs/ and packaging/
// leads somewhere.
func TestRepositoryLinks(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files := pages(t, root)
	for _, want := range []string{"README.md", "docs/guarantees.md", "docs/stores/sqlite.md"} {
		if !slices.Contains(files, want) {
			t.Fatalf("pages %v lack %s: the walk does not reach the repository's pages", files, want)
		}
	}
	broken, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Errorf("%s", b)
	}
}

// TestDocsIndexListsEveryPage: docs/README.md, the index the README links
// to, links to every page under docs/.
func TestDocsIndexListsEveryPage(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range Links(string(index)) {
		path, _, _ := strings.Cut(l.Target, "#")
		linked[filepath.ToSlash(filepath.Join("docs", path))] = true
	}
	for _, page := range pages(t, root) {
		if strings.HasPrefix(page, "docs/") && page != "docs/README.md" && !linked[page] {
			t.Errorf("docs/README.md does not link to %s", page)
		}
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Many hosts: choosing a store", "many-hosts-choosing-a-store"},
		{"leaderrun status", "leaderrun-status"},
		{"The command's environment", "the-commands-environment"},
		{"Moving one partition: `step-down --partition`", "moving-one-partition-step-down---partition"},
		{"What is guaranteed — and what is not", "what-is-guaranteed--and-what-is-not"},
		{"Kubernetes: leaderrun's store beside client-go's leader election", "kubernetes-leaderruns-store-beside-client-gos-leader-election"},
		{"[SQLite](stores/sqlite.md) (default)", "sqlite-default"},
		{"snake_case and 1,024 names", "snake_case-and-1024-names"},
		{"Größe", "größe"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	text := "# Title\n\n## Usage\n\n```\n# not a heading\n```\n\n    # not one either\n\n## Usage\n\n<a id=\"old-name\"></a>\n### Closed ###\n"
	got := Anchors(text)
	for _, want := range []string{"title", "usage", "usage-1", "old-name", "closed"} {
		if !got[want] {
			t.Errorf("Anchors lack %q: %v", want, got)
		}
	}
	for _, wrong := range []string{"not-a-heading", "not-one-either", "usage-2"} {
		if got[wrong] {
			t.Errorf("Anchors has %q: %v", wrong, got)
		}
	}
}

func TestLinks(t *testing.T) {
	text := "See [a](a.md#x) and [b](<b c.md> \"title\"), `[not](code.md)`.\n\n" +
		"    [indented](code.md)\n\n```\n[fenced](code.md)\n```\n* item\n    [continued](list.md)\n\n[ref]: ref.md#y\n"
	var got []string
	for _, l := range Links(text) {
		got = append(got, l.Target)
	}
	want := []string{"a.md#x", "b c.md", "list.md", "ref.md#y"}
	if !slices.Equal(got, want) {
		t.Errorf("Links = %q, want %q", got, want)
	}
}

// Check finds each kind of broken link, and passes the good ones.
func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# leaderrun\n\n## Quick start\n\n"+
		"[ok](docs/page.md#a-section) [ok](#quick-start) [ok](https://example.org/x#y) [ok](man:leaderrun(1)) [ok](packaging/)\n"+
		"[no file](docs/gone.md)\n"+
		"[no anchor](docs/page.md#no-section)\n"+
		"[no local anchor](#quick-stop)\n"+
		"[outside](../elsewhere.md)\n")
	write("docs/page.md", "# Page\n\n## A section\n\n[back](../README.md#quick-start) [broken back](../README.md#install)\n")
	write("packaging/x", "")
	broken, err := Check(root, []string{"README.md", "docs/page.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range broken {
		got = append(got, b.File+" "+b.Target)
	}
	want := []string{
		"README.md docs/gone.md",
		"README.md docs/page.md#no-section",
		"README.md #quick-stop",
		"README.md ../elsewhere.md",
		"docs/page.md ../README.md#install",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Check found %q, want %q", got, want)
	}
}
