package compat

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// javaRegexp translates a pattern of the subset to Go's syntax with Java's meaning of '.',
// which excludes Java's line terminators; Go's regexp, like Java's, finds the leftmost match
// and prefers as the quantifiers say.
func javaRegexp(t testing.TB, p string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(p, "(.", "([^\n\r\u0085\u2028\u2029]"))
}

var keyTagPatterns = []string{
	JedisDefaultKeyTag, `^([^:]+):`, `\[(.+?)\]`, `<(.*?)>`, `\{(.+)\}`, `(.*)`, `^(.+?)\.`,
	`user:([^:]*):`, `([^\}]+)\}`, `\{\{(.+?)\}\}`, `#(.+?);`, `([^a-]+)`,
}

// Every pattern of the subset finds what Go's regexp (with Java's '.') finds, on keys made of
// the characters that matter: braces, colons, brackets, line terminators, multibyte ones.
func TestKeyTagAgainstRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	alphabet := []string{"{", "}", "{", "}", ":", "[", "]", "<", ">", ".", "a", "b", "x", "-", "#", "$",
		"\n", "\r", "\u0085", "\u2028", "é", "日", "🙂", " "}
	for _, p := range keyTagPatterns {
		k, err := parseKeyTag(p)
		require.NoErrorf(t, err, "parseKeyTag(%q)", p)
		re := javaRegexp(t, p)
		for range 20000 {
			var b strings.Builder
			for range r.IntN(14) {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			key := b.String()
			want := key
			if m := re.FindStringSubmatch(key); m != nil {
				want = m[1]
			}
			if got := k.apply(key); got != want {
				t.Fatalf("pattern %q, key %q: %q, want %q", p, key, got, want)
			}
		}
	}
}

// The README's cases of the default pattern.
func TestKeyTagDefault(t *testing.T) {
	k, err := parseKeyTag(JedisDefaultKeyTag)
	require.NoError(t, err)
	for key, want := range map[string]string{
		"{}": "{}", "foo{}{bar}": "}{bar", "foo{{bar}}zap": "{bar", "{{a}}": "{a", "x{y}z{w}": "y",
		"{": "{", "}{": "}{", "a{b": "a{b", "{user1000}.following": "user1000", "{a\nb}{c}": "c",
	} {
		require.Equalf(t, want, k.apply(key), "key %q", key)
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = k.apply("foo{bar}zap") }))
	long := strings.Repeat("{", 1<<16) // no '}': one pass, not one per '{'
	require.Equal(t, long, k.apply(long))
}

func TestKeyTagOutsideSubset(t *testing.T) {
	for _, p := range []string{
		"", "abc", "(?:x)", "(a+)", "(.+", ".(.+)", "(.+)|x", "(.)", "(.{2})", "([a-z]+)", "([^a-z]+)",
		`(\d+)`, "x*(.+)", "(.+)(.+)", `([^\w]+)`, "([^é]+)", "a{(.+)}",
	} {
		_, err := parseKeyTag(p)
		require.Errorf(t, err, "parseKeyTag(%q) accepted", p)
	}
}

func FuzzKeyTag(f *testing.F) {
	for _, p := range keyTagPatterns {
		f.Add(p, "foo{bar}:baz[q]<r>")
	}
	f.Fuzz(func(t *testing.T, p, key string) {
		k, err := parseKeyTag(p)
		if err != nil {
			return
		}
		re, err := regexp.Compile(strings.ReplaceAll(p, "(.", "([^\n\r\u0085\u2028\u2029]"))
		if err != nil {
			t.Fatalf("pattern %q is in the subset but not a regexp: %v", p, err)
		}
		if !strings.Contains(key, "\xff") && !strings.ContainsAny(key, "\x80\xfe") { // valid-ish UTF-8 only
			want := key
			if m := re.FindStringSubmatch(key); m != nil {
				want = m[1]
			}
			if got := k.apply(key); got != want {
				t.Fatalf("pattern %q, key %q: %q, want %q", p, key, got, want)
			}
		}
	})
}
