// Command gen writes leaderrun's manual page and its bash, zsh and fish
// completions from the CLI definition in package cmd, for the packages:
//
//	go run ./packaging/gen -version v1.2.3 -out packaging/out
//
// It writes OUT/leaderrun.1.gz and OUT/completions/{leaderrun.bash,
// _leaderrun, leaderrun.fish}; `make man` runs it in a checkout. With
// -readme it prints the README's table of options instead, which a test
// keeps equal to the README's:
//
//	go run ./packaging/gen -readme
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "packaging/out", "directory to write into")
	version := flag.String("version", "dev", "version named in the manual page")
	readme := flag.Bool("readme", false, "print the README's table of options instead")
	flag.Parse()
	if *readme {
		p, err := programOf(app())
		if err == nil {
			err = writeOptionsTable(os.Stdout, p)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := generate(*out, *version); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}

func generate(out, version string) error {
	p, err := programOf(app())
	if err != nil {
		return err
	}
	files := map[string]func(io.Writer) error{
		"leaderrun.1.gz": func(w io.Writer) error { return gzipped(w, func(w io.Writer) error { return writeMan(w, p, version) }) },
	}
	for shell, name := range map[string]string{"bash": "leaderrun.bash", "zsh": "_leaderrun", "fish": "leaderrun.fish"} {
		files[filepath.Join("completions", name)] = func(w io.Writer) error { return writeCompletion(w, shell, p) }
	}
	for name, write := range files {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gzipped compresses what write writes, without a name or time in the
// header, so the same input gives the same bytes.
func gzipped(w io.Writer, write func(io.Writer) error) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := write(zw); err != nil {
		return err
	}
	return zw.Close()
}
