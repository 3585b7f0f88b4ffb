package main

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// binariesNote says how the Signet binaries in bin were built, as far as their speed goes: the
// GODEBUG default each carries (make build sets one for the daemons, see the Makefile), and
// the extra environment SIGNET_BENCH_SIGNER_ENV gave the signer processes, if any.
func binariesNote(bin string) (string, error) {
	var parts []string
	for _, name := range []string{"signet-server", "signet-watcher"} {
		info, err := buildinfo.ReadFile(filepath.Join(bin, name))
		if err != nil {
			return "", fmt.Errorf("reading the build information of %s (run make build): %w", name, err)
		}
		var ldflags string
		for _, s := range info.Settings {
			if s.Key == "-ldflags" {
				ldflags = s.Value
			}
		}
		def := godebugDefault(ldflags)
		if def == "" {
			def = "none"
		}
		parts = append(parts, fmt.Sprintf("%s `%s`", name, def))
	}
	note := "Signet's binaries: built-in GODEBUG default " + strings.Join(parts, ", ") + " (`make build`; see the Makefile)"
	if extra := os.Getenv("SIGNET_BENCH_SIGNER_ENV"); extra != "" {
		note += "; extra environment of every signer process (SIGNET_BENCH_SIGNER_ENV): `" + extra + "`"
	}
	return note + ".\n", nil
}

// godebugDefault returns the value ldflags (a binary's -ldflags build setting) gives the Go
// runtime's built-in GODEBUG default with -X, or "" if it sets none; a later -X wins, as in
// the linker.
func godebugDefault(ldflags string) string {
	const symbol = "runtime.godebugDefault="
	var value string
	fields := strings.Fields(ldflags)
	for i, f := range fields {
		f = strings.Trim(f, `"'`)
		switch {
		case strings.HasPrefix(f, "-X="+symbol), strings.HasPrefix(f, "--X="+symbol):
			value = f[strings.Index(f, symbol)+len(symbol):]
		case (f == "-X" || f == "--X") && i+1 < len(fields) && strings.HasPrefix(strings.Trim(fields[i+1], `"'`), symbol):
			value = strings.Trim(fields[i+1], `"'`)[len(symbol):]
		}
	}
	return value
}
