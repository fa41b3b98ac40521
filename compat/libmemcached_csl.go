package compat

import (
	"regexp"
	"strconv"
	"strings"
)

// This file reads libmemcached's configuration string, the text memcached() and
// memcached_parse_configuration take: statements separated by one space, such as
// "--SERVER=10.0.0.7:11211/?2 --DISTRIBUTION=consistent --HASH=MD5". The scanner and
// grammar are those of src/libmemcached/csl/scanner.l and parser.yy (1.1.4): the same
// tokens, matched longest first and case-insensitively, and the same statements, each
// applied to the client model as libmemcached applies it.

// cslToken is one token of the scanner.
type cslToken struct {
	kind string // a rule's name, or the option's text ("--SERVER=") for options
	text string
	line int
}

// cslRules are the scanner's rules in its order: on matches of equal length the earlier
// rule wins, as in flex.
var cslRules = func() []struct {
	kind string
	re   *regexp.Regexp
} {
	var rules []struct {
		kind string
		re   *regexp.Regexp
	}
	add := func(kind, pattern string) {
		rules = append(rules, struct {
			kind string
			re   *regexp.Regexp
		}{kind, regexp.MustCompile(`^(?:` + pattern + `)`)})
	}
	add("char", `[=, ]`)
	add("NUMBER", `[0-9]+`)
	add("PORT", `:[0-9]{1,5}`)
	add("WEIGHT", `/\?[0-9]{1,5}`)
	add("skip", `[\t\r\n]`)
	add("COMMENT", `#[^\n]*`) // only at the start of a line; see cslScan
	for _, opt := range cslOptions {
		add(opt, `(?i)`+regexp.QuoteMeta(opt))
	}
	for _, kw := range []string{"INCLUDE", "RESET", "DEBUG", "SERVERS", "END", "CSL_ERROR", "TRUE", "FALSE"} {
		add(kw, `(?i)`+kw)
	}
	add("UNKNOWN_OPTION", `--[[:alnum:]]*`)
	for _, kw := range []string{"CONSISTENT", "MODULA", "RANDOM", "MD5", "CRC", "FNV1_64", "FNV1A_64", "FNV1_32", "FNV1A_32", "HSIEH", "MURMUR", "JENKINS"} {
		add(kw, `(?i)`+kw)
	}
	add("IPADDRESS", `([0-9]{1,3}\.){3}[0-9]{1,3}`)
	add("WORD", `[[:alnum:]][.[:alnum:]_-]+[[:alnum:]]`) // HOSTNAME after --SERVER=, else STRING
	add("QUOTED", `L?"(\\.|[^\\"])*"`)
	return rules
}()

// cslOptions are the scanner's options; those ending in '=' take a value.
var cslOptions = []string{"--SERVER=", "--SOCKET=", "--BINARY-PROTOCOL", "--BUFFER-REQUESTS",
	"--CONFIGURE-FILE=", "--CONNECT-TIMEOUT=", "--DISTRIBUTION=", "--HASH-WITH-NAMESPACE", "--HASH=",
	"--IO-BYTES-WATERMARK=", "--IO-KEY-PREFETCH=", "--IO-MSG-WATERMARK=", "--NOREPLY",
	"--NUMBER-OF-REPLICAS=", "--POLL-TIMEOUT=", "--RANDOMIZE-REPLICA-READ", "--RCV-TIMEOUT=",
	"--REMOVE-FAILED-SERVERS=", "--RETRY-TIMEOUT=", "--SND-TIMEOUT=", "--SOCKET-RECV-SIZE=",
	"--SOCKET-SEND-SIZE=", "--SORT-HOSTS", "--SUPPORT-CAS", "--TCP-KEEPALIVE", "--TCP-KEEPIDLE",
	"--TCP-NODELAY", "--USE-UDP", "--USER-DATA", "--VERIFY-KEY", "--POOL-MIN=", "--POOL-MAX=",
	"--NAMESPACE=", "--FETCH-VERSION"}

// cslNumberBehaviors and cslBooleanBehaviors map options to the behaviors they set.
var (
	cslNumberBehaviors = map[string]string{"--REMOVE-FAILED-SERVERS=": "REMOVE_FAILED_SERVERS",
		"--CONNECT-TIMEOUT=": "CONNECT_TIMEOUT", "--IO-MSG-WATERMARK=": "IO_MSG_WATERMARK",
		"--IO-BYTES-WATERMARK=": "IO_BYTES_WATERMARK", "--IO-KEY-PREFETCH=": "IO_KEY_PREFETCH",
		"--NUMBER-OF-REPLICAS=": "NUMBER_OF_REPLICAS", "--POLL-TIMEOUT=": "POLL_TIMEOUT",
		"--RCV-TIMEOUT=": "RCV_TIMEOUT", "--RETRY-TIMEOUT=": "RETRY_TIMEOUT",
		"--SND-TIMEOUT=": "SND_TIMEOUT", "--SOCKET-RECV-SIZE=": "SOCKET_RECV_SIZE",
		"--SOCKET-SEND-SIZE=": "SOCKET_SEND_SIZE"}
	cslBooleanBehaviors = map[string]string{"--BINARY-PROTOCOL": "BINARY_PROTOCOL",
		"--BUFFER-REQUESTS": "BUFFER_REQUESTS", "--HASH-WITH-NAMESPACE": "HASH_WITH_PREFIX_KEY",
		"--NOREPLY": "NOREPLY", "--RANDOMIZE-REPLICA-READ": "RANDOMIZE_REPLICA_READ",
		"--SORT-HOSTS": "SORT_HOSTS", "--SUPPORT-CAS": "SUPPORT_CAS", "--TCP-NODELAY": "TCP_NODELAY",
		"--TCP-KEEPALIVE": "TCP_KEEPALIVE", "--TCP-KEEPIDLE": "TCP_KEEPIDLE", "--USE-UDP": "USE_UDP",
		"--VERIFY-KEY": "VERIFY_KEY"}
	cslHashes = map[string]int{"MD5": 1, "CRC": 2, "FNV1_64": 3, "FNV1A_64": 4, "FNV1_32": 5,
		"FNV1A_32": 6, "HSIEH": 7, "MURMUR": 8, "JENKINS": 9}
	cslDistributions = map[string]int{"CONSISTENT": lmConsistent, "MODULA": lmModula, "RANDOM": lmRandom}
)

// cslScan splits text into tokens, dropping tabs and line breaks.
func cslScan(text string) []cslToken {
	var toks []cslToken
	line := 1
	for i := 0; i < len(text); {
		best, kind := 0, ""
		for _, r := range cslRules {
			if r.kind == "COMMENT" && i > 0 && text[i-1] != '\n' {
				continue
			}
			if m := r.re.FindString(text[i:]); len(m) > best {
				best, kind = len(m), r.kind
			}
		}
		if best == 0 { // flex's last rule, ".": one unknown byte, a syntax error where the parser meets it
			best, kind = 1, "UNKNOWN"
		}
		tok := cslToken{kind: kind, text: text[i : i+best], line: line}
		if kind == "char" || kind == "skip" {
			tok.kind = tok.text
		}
		if kind != "skip" {
			toks = append(toks, tok)
		}
		line += strings.Count(tok.text, "\n")
		i += best
	}
	return toks
}

// applyConfigString applies a configuration string (parser.yy: statements separated by one
// space).
func (c *lmClient) applyConfigString(text string) error {
	toks := cslScan(text)
	hasHash := false
	for i := 0; i < len(toks); {
		if i > 0 {
			if toks[i].kind != " " {
				return configErr("libmemcached", toks[i].line, "statements are separated by one space; found %q after the statement", toks[i].text)
			}
			if i++; i == len(toks) {
				return configErr("libmemcached", toks[i-1].line, "a space after the last statement")
			}
			if toks[i].kind == " " {
				return configErr("libmemcached", toks[i].line, "two spaces in a row: statements are separated by one space")
			}
		}
		t := toks[i]
		i++
		c.line = t.line
		fail := func(format string, args ...any) error {
			return configErr("libmemcached", t.line, "%s: %s", t.text, sprintf(format, args...))
		}
		// next returns the next token if it is of one of kinds, and moves past it.
		next := func(kinds ...string) (cslToken, bool) {
			if i < len(toks) {
				for _, k := range kinds {
					if toks[i].kind == k {
						i++
						return toks[i-1], true
					}
				}
			}
			return cslToken{}, false
		}
		str := func() (string, bool) {
			if s, ok := next("WORD"); ok {
				return s.text, true
			}
			if s, ok := next("QUOTED"); ok {
				// The scanner drops the first and the last byte: L"x" gives "x, with its quote.
				return s.text[1 : len(s.text)-1], true
			}
			return "", false
		}
		weight := func() uint32 {
			if w, ok := next("WEIGHT"); ok {
				v, _ := strconv.Atoi(w.text[2:])
				return uint32(v)
			}
			return 1
		}
		switch kind := strings.ToUpper(t.kind); {
		case kind == "COMMENT" || kind == "DEBUG":
		case kind == "END":
			return nil
		case kind == "CSL_ERROR":
			return fail("ERROR called directly")
		case kind == "RESET":
			*c = lmClient{}
		case kind == "INCLUDE" || kind == "--CONFIGURE-FILE=":
			return fail("reads a configuration file: give its text here instead")
		case kind == "--SERVER=":
			host, ok := next("WORD", "IPADDRESS")
			if !ok {
				return fail("a host name of three characters or more, or an IPv4 address, must follow (IPv6 is not in the language)")
			}
			port := 11211
			if p, ok := next("PORT"); ok {
				port, _ = strconv.Atoi(p.text[1:])
			}
			if err := c.serverAdd(host.text, uint16(port), weight()); err != nil {
				return fail("Failed to add server: %s:%d: %v", host.text, uint16(port), err)
			}
		case kind == "--SOCKET=":
			path, ok := str()
			if !ok {
				return fail("a quoted path must follow")
			}
			if err := c.serverAddSocket(path, weight()); err != nil {
				return fail("Failed to add socket: %s: %v", path, err)
			}
		case kind == "--POOL-MIN=" || kind == "--POOL-MAX=":
			if _, ok := next("NUMBER"); !ok {
				return fail("a number must follow")
			}
		case kind == "--NAMESPACE=":
			ns, ok := str()
			if !ok {
				return fail("a namespace must follow")
			}
			if c.nsSet {
				return fail("--NAMESPACE can only be called once")
			}
			if err := c.setNamespace(ns); err != nil {
				return fail("%v", err)
			}
		case kind == "--FETCH-VERSION" || kind == "--USER-DATA":
		case kind == "--DISTRIBUTION=":
			d, ok := next("CONSISTENT", "MODULA", "RANDOM")
			if !ok {
				return fail("consistent, modula or random must follow")
			}
			if err := c.setDistribution(uint64(cslDistributions[strings.ToUpper(d.kind)])); err != nil {
				return fail("%v", err)
			}
			if _, comma := next(","); comma {
				h, ok := next("MD5", "CRC", "FNV1_64", "FNV1A_64", "FNV1_32", "FNV1A_32", "HSIEH", "MURMUR", "JENKINS")
				if !ok {
					return fail("a hash must follow the comma")
				}
				if err := c.setHash(uint64(cslHashes[h.kind]), false); err != nil {
					return fail("Unable to set the hash for the DISTRIBUTION requested: %v", err)
				}
			}
		case kind == "--HASH=":
			h, ok := next("MD5", "CRC", "FNV1_64", "FNV1A_64", "FNV1_32", "FNV1A_32", "HSIEH", "MURMUR", "JENKINS")
			if !ok {
				return fail("one of MD5, CRC, FNV1_64, FNV1A_64, FNV1_32, FNV1A_32, HSIEH, MURMUR, JENKINS must follow")
			}
			if hasHash {
				return fail("--HASH can only be set once")
			}
			if err := c.setHash(uint64(cslHashes[h.kind]), true); err != nil {
				return fail("%v", err)
			}
			hasHash = true
		case cslNumberBehaviors[kind] != "":
			n, ok := next("NUMBER")
			if !ok {
				return fail("a number must follow")
			}
			v, _ := strconv.ParseUint(n.text, 10, 64)
			if err := c.behaviorSet(cslNumberBehaviors[kind], uint64(int64(int32(uint32(v))))); err != nil {
				return fail("Unable to set behavior: %v", err)
			}
		case cslBooleanBehaviors[kind] != "":
			if err := c.behaviorSet(cslBooleanBehaviors[kind], 1); err != nil {
				return fail("Could not set: MEMCACHED_BEHAVIOR_%s: %v", cslBooleanBehaviors[kind], err)
			}
		case kind == "UNKNOWN_OPTION":
			return fail("Unknown option")
		case kind == "UNKNOWN":
			return fail("an unknown token")
		default:
			return fail("a statement cannot start here")
		}
	}
	return nil
}
