package compat

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Fuzz targets for every configuration reader: whatever the text, a preset returns a pool
// or an error that names the system and wraps ErrConfig (or a pool sentinel), never panics,
// and a pool it returns places keys on its members. Seeds: every configuration of the
// system's vectors, refusals included.

func fuzzPreset(f *testing.F, system string, globs ...string) {
	for _, glob := range globs {
		paths, err := filepath.Glob(filepath.Join(vectorRoot, glob))
		if err != nil {
			f.Fatal(err)
		}
		for _, path := range paths {
			config, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(config)
		}
	}
	preset := presetOf(f, system)
	f.Fuzz(func(t *testing.T, config []byte) {
		p, err := preset.New(config, "")
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if !strings.HasPrefix(err.Error(), "compat: "+system+": ") {
				t.Fatalf("error %q does not name the system", err)
			}
			return
		}
		names := map[string]bool{}
		for _, n := range p.Nodes() {
			names[n.Name] = true
		}
		for _, k := range []string{"", "a", "user:1000", "{x}y", "日本語"} {
			if owner := p.Locate(k); !names[owner] {
				t.Fatalf("Locate(%q) = %q, not a member of %v", k, owner, slices.Collect(func(yield func(string) bool) {
					for n := range names {
						yield(n)
					}
				}))
			}
		}
	})
}

func FuzzTwemproxy(f *testing.F) { fuzzPreset(f, "twemproxy", "twemproxy/*.yml") }

func FuzzLibmemcached(f *testing.F) {
	fuzzPreset(f, "libmemcached", "libmemcached/*.conf", "libmemcached/csl/*.csl")
}

func FuzzSpymemcached(f *testing.F) { fuzzPreset(f, "spymemcached", "spymemcached/*.conf") }

func FuzzHashring(f *testing.F) { fuzzPreset(f, "hashring", "hashring/*.json") }
