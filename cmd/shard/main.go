// Command shard answers an operator's questions about a sharded system without writing Go:
// which shard or node holds a key, what a change would move, whether a saved table is
// sound, and how the strategies compare.
//
//	shard locate -strategy jump -n 10 user:1 user:2
//	shard locate -strategy ring -nodes "a,b:2,c" -        # keys on stdin, one per line
//	shard plan -strategy partitions -n 10 -to 11          # what a resize moves
//	shard table show partitions.txt                       # a saved table, checked and summed up
//	shard table edit -resize 12 -w partitions.txt         # and changed, the file replaced safely
//	shard compare                                         # every strategy side by side
//
// Every verb takes -json for output that programs read. The exit status is 0 on success, 1
// when the work fails (a file that cannot be read, a table that does not parse) and 2 on bad
// usage (an unknown verb, strategy or flag, a shard count out of range, a missing argument).
// Every error is one line, prefixed with the verb. Run "shard help VERB" for a verb's flags.
//
// No input, typed or read, makes the command use memory or time out of proportion: every
// numeric flag has an upper bound, checked as it is parsed; configurations and saved tables
// are read up to 16 MiB, each line up to 1 MiB; key files and stdin up to a count and a size
// of keys, each key up to 64 KiB; plan bounds the work of a rendezvous placement and the flows
// it lists. "shard help VERB" states each verb's limits (limits.go defines them).
//
// Install it from the root of a clone of the repository with
//
//	go install ./cmd/shard
//
// (no version is published yet; once one is, go install
// github.com/shardkit/shard/cmd/shard@latest will do).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/shardkit/shard/catalog"
)

// verb is one of the command's verbs.
type verb struct {
	name, args, summary string
	about               string // printed under the usage line by -h and help
	names               bool   // whether usage ends with the names of the strategies
	// flags defines the verb's flags on fs and returns what does the work: it parses the
	// command-line arguments after the verb with fs, then runs.
	flags func(fs *flag.FlagSet) func(e *env, args []string) error
}

// verbs lists the verbs in the order usage shows them.
var verbs = []*verb{locateVerb, planVerb, tableVerb, compareVerb}

// env is where a verb reads and writes: the process's files in main, buffers in tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// stderrTerminal says whether stderr is a terminal, where progress is shown.
	stderrTerminal bool
	verb           string // the verb running, for warnings
}

// warn prints a warning on stderr: one line, prefixed with the verb.
func (e *env) warn(msg string) {
	fmt.Fprintf(e.stderr, "shard %s: warning: %s\n", e.verb, msg)
}

// usageError is bad usage: the command exits with status 2 and shows the usage line.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// badUsage returns a usageError with a formatted message.
func badUsage(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func main() {
	fi, err := os.Stderr.Stat()
	e := &env{
		stdin:          os.Stdin,
		stdout:         os.Stdout,
		stderr:         os.Stderr,
		stderrTerminal: err == nil && fi.Mode()&os.ModeCharDevice != 0,
	}
	os.Exit(run(e, os.Args[1:]))
}

// run runs the command with args (without the program name) and returns the exit status.
func run(e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, "shard: no verb given\n\n")
		commandUsage(e.stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(e, rest)
	}
	v := findVerb(name)
	if v == nil {
		fmt.Fprintf(e.stderr, "shard: unknown verb %.80q\n\n", name)
		commandUsage(e.stderr)
		return 2
	}
	e.verb = v.name
	// The flag package prints nothing: -h prints the usage below, and a bad flag is reported
	// in one line, as every other usage error.
	fs := flag.NewFlagSet("shard "+v.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := v.flags(fs)(e, rest)
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		verbUsage(e.stderr, v, fs)
		return 0
	case errors.As(err, &u):
		fmt.Fprintf(e.stderr, "shard %s: %s\n", v.name, oneLine(err))
		return 2
	default:
		fmt.Fprintf(e.stderr, "shard %s: %s\n", v.name, oneLine(err))
		return 1
	}
}

// parse parses args into fs and returns the positional arguments. A bad flag is a
// usageError; -h returns flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	return fs.Args(), nil
}

// parseInterleaved is parse for a verb whose arguments are keys: flags after a key are
// parsed as flags too ("locate k1 -replicas 2" is "locate -replicas 2 k1"). An argument that
// begins with '-' and is not a flag of fs is a key, and so is every argument after "--".
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var keys []string
	for {
		rest, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(keys, rest...), nil
		}
		i := 0
		for i < len(rest) && rest[i] != "--" && !isFlag(fs, rest[i]) {
			i++
		}
		keys = append(keys, rest[:i]...)
		switch {
		case i == len(rest):
			return keys, nil
		case rest[i] == "--":
			return append(keys, rest[i+1:]...), nil
		}
		args = rest[i:]
	}
}

// isFlag says whether arg is -NAME, --NAME or -NAME=VALUE for a flag NAME of fs, or -h.
func isFlag(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok || name == "" {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	name, _, _ = strings.Cut(name, "=")
	return fs.Lookup(name) != nil || name == "h" || name == "help"
}

func findVerb(name string) *verb {
	for _, v := range verbs {
		if v.name == name {
			return v
		}
	}
	return nil
}

// help prints the command's usage, or a verb's, to stdout.
func help(e *env, args []string) int {
	switch len(args) {
	case 0:
		commandUsage(e.stdout)
		return 0
	case 1:
		if args[0] == "presets" {
			presetsHelp(e.stdout)
			return 0
		}
		if v := findVerb(args[0]); v != nil {
			fs := flag.NewFlagSet("shard "+v.name, flag.ContinueOnError)
			v.flags(fs)
			verbUsage(e.stdout, v, fs)
			return 0
		}
		fmt.Fprintf(e.stderr, "shard help: unknown verb %q\n\n", args[0])
	default:
		fmt.Fprint(e.stderr, "shard help: want at most one verb\n\n")
	}
	commandUsage(e.stderr)
	return 2
}

func commandUsage(w io.Writer) {
	fmt.Fprint(w, "usage: shard VERB [flags] [arguments]\n\n")
	fmt.Fprint(w, "Which shard or node holds a key, what a change moves, whether a saved table is sound,\nand how the placement strategies compare.\n\nVerbs:\n")
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-8s %s\n", v.name, v.summary)
	}
	fmt.Fprint(w, "\nRun 'shard help VERB' or 'shard VERB -h' for a verb's flags, 'shard help presets' for the\nsystems whose placement -preset reproduces. Every verb takes -json.\n")
	fmt.Fprint(w, "Exit status: 0 done, 1 failed, 2 bad usage. Every numeric flag has an upper bound and every\nfile a size limit, checked before any work: 'shard help VERB' states them.\n")
}

func verbUsage(w io.Writer, v *verb, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: shard %s %s\n\n%s\n", v.name, v.args, strings.TrimSpace(v.about))
	fmt.Fprint(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	if v.names {
		fmt.Fprintf(w, "\n%s\n", namesHelp())
	}
}

// presetsHelp lists the compatibility presets with what each reads.
func presetsHelp(w io.Writer) {
	fmt.Fprint(w, "Presets place keys exactly as another system does, read from that system's own\nconfiguration: shard locate|plan -preset NAME -config FILE [-pool NAME]; a topic's\npartitions: shard locate|plan -preset kafka -partitions N [-config FILE].\n\n")
	fmt.Fprint(w, "Each is checked against placements recorded from the real system (testdata/compat).\n\n")
	for _, p := range catalog.Presets() {
		fmt.Fprintf(w, "  %s (%d placements checked)\n      %s\n", p.Name, p.Checked, wrap(p.Doc, 74, "      "))
	}
}

// maxErrorLine is the longest error the command prints: messages quote excerpts, but a flag
// value or a path is quoted whole by the flag package and the file system.
const maxErrorLine = 400

// oneLine returns err's message on one line of at most maxErrorLine bytes: its start and its
// end, which says what was wanted, around "...".
func oneLine(err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", `\n`)
	if len(msg) > maxErrorLine {
		msg = msg[:maxErrorLine/2] + " ... " + msg[len(msg)-maxErrorLine/2:]
	}
	return msg
}
