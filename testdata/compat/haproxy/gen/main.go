// Command gen makes the HAProxy compatibility vectors: it writes every backend section of
// configs.go into -dir, starts HAProxy with those files loaded as they are, sends every key
// of keys.txt through HAProxy's front door, and writes which server line answered. It also
// records the configurations HAProxy refuses and prints what it observed about header
// values, the empty key and weight 0 (quoted in the README).
//
// Run it through gen.sh: it expects a private network namespace, so the fixed ports of the
// committed sections are its own.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

const (
	front = "127.0.0.1:20080" // HAProxy's front door inside the private namespace
	echo  = "127.0.0.1:20082" // answers with what HAProxy's header fetches return
)

func main() {
	dir := flag.String("dir", "", "output directory (testdata/compat/haproxy)")
	keysPath := flag.String("keys", "", "keys.txt")
	work := flag.String("work", "", "scratch directory for the global section and twin backends")
	flag.Parse()
	if *dir == "" || *keysPath == "" || *work == "" {
		log.Fatal("usage: gen -dir DIR -keys keys.txt -work SCRATCH")
	}
	keys, err := readKeys(*keysPath)
	check(err)
	version := systemVersion()

	bes := backends()
	files := []string{filepath.Join(*work, "base.cfg")}
	check(os.WriteFile(files[0], []byte(baseConf()), 0o644))
	for _, b := range bes {
		p := filepath.Join(*dir, b.name+".cfg")
		check(os.WriteFile(p, []byte(b.section()), 0o644))
		files = append(files, p)
	}
	// Backends for the observations (not committed): each backend again under
	// "balance hdr(X-Key)", and the odd sections HAProxy accepts.
	var twins strings.Builder
	for _, b := range bes {
		twins.WriteString(hdrTwin(b))
	}
	for _, a := range accepted {
		twins.WriteString(strings.Replace(a.section, "backend refused", "backend obs-"+a.what, 1))
	}
	files = append(files, filepath.Join(*work, "twins.cfg"))
	check(os.WriteFile(files[len(files)-1], []byte(twins.String()), 0o644))

	stop := startHAProxy(files)
	defer stop()
	c := dial(front)
	defer c.close()
	for _, b := range bes {
		check(writeVectors(c, *dir, version, b, keys))
	}
	observe(c, keys, *dir, bes)
	stop()

	recordRefusals(*dir, *work)
}

// hdrTwin is backend b under "balance hdr(X-Key)", named <b.name>.hdr.
func hdrTwin(b backend) string {
	s := b.section()
	s = strings.Replace(s, "backend "+b.name+"\n", "backend "+b.name+".hdr\n", 1)
	return strings.Replace(s, balance, "balance hdr(X-Key)", 1)
}

// baseConf is everything but the backends: the front door, which picks the backend named
// by X-Cfg and adds the name of the server that answered, one responder per server port
// that answers with its own address, and the echo door.
func baseConf() string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    maxconn 1000
    nbthread 1

defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s

frontend front
    bind %s
    http-response set-header X-Server %%[srv_name]
    use_backend %%[req.hdr(X-Cfg)]

frontend echo
    bind %s
    http-request return status 200 content-type text/plain lf-string "hdr=[%%[req.hdr(X-Key)]] fhdr=[%%[req.fhdr(X-Key)]]"
`, front, echo)
	for i := 1; i <= 10; i++ {
		a := fmt.Sprintf("127.0.0.1:%d", 31000+i)
		fmt.Fprintf(&b, "\nfrontend r%d\n    bind %s\n    http-request return status 200 content-type text/plain string \"%s\"\n", 31000+i, a, a)
	}
	return b.String()
}

// startHAProxy runs haproxy in the foreground as a child and waits for the front door.
func startHAProxy(files []string) (stop func()) {
	args := []string{"-db"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	cmd := exec.Command("haproxy", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	check(cmd.Start())
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	for range 100 {
		if c, err := net.Dial("tcp", front); err == nil {
			c.Close()
			return stop
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	log.Fatal("haproxy did not open its front door")
	return nil
}

// urlpPath is the request path that carries key k in the query argument k, every byte but
// the unreserved ones percent-encoded, so url_dec gives back exactly k.
func urlpPath(k string) string {
	var b strings.Builder
	b.WriteString("/?k=")
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// place sends key k through backend name and returns the index of the server line that
// answered, checked against the name HAProxy reports.
func place(c *client, b backend, path string, headers [][2]string) (int, error) {
	r, err := c.get(path, headers)
	if err != nil {
		return 0, err
	}
	if r.status != 200 {
		return 0, fmt.Errorf("status %d", r.status)
	}
	for i, l := range b.servers {
		f := strings.Fields(l)
		if f[1] == r.body {
			if f[0] != r.header("X-Server") {
				return 0, fmt.Errorf("answered by %s but HAProxy names %s", r.body, r.header("X-Server"))
			}
			return i, nil
		}
	}
	return 0, fmt.Errorf("answered by %s, not a server of the backend", r.body)
}

// writeVectors sends every key through backend b and writes <b.name>.txt.
func writeVectors(c *client, dir, version string, b backend, keys []string) error {
	var names []string
	for i, l := range b.servers {
		names = append(names, fmt.Sprintf("%d=%s", i, strings.Fields(l)[0]))
	}
	var s strings.Builder
	fmt.Fprintf(&s, "# system: %s, backend %s of %s.cfg\n", version, b.name, b.name)
	s.WriteString("# front door: GET /?k=<key, percent-encoded> through HAProxy (" + balance + " hashes exactly the key); the server that answered names its address, HAProxy its name\n")
	fmt.Fprintf(&s, "# servers: %s\n", strings.Join(names, " "))
	s.WriteString("# note: key 0 (empty) is hashed as the empty string here; under balance hdr(...) an empty or missing header goes round robin instead\n")
	for i, k := range keys {
		idx, err := place(c, b, urlpPath(k), [][2]string{{"X-Cfg", b.name}})
		if err != nil {
			return fmt.Errorf("%s key %d: %v", b.name, i, err)
		}
		fmt.Fprintf(&s, "%d %d\n", i, idx)
	}
	return os.WriteFile(filepath.Join(dir, b.name+".txt"), []byte(s.String()), 0o644)
}

func systemVersion() string {
	deb, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "haproxy").Output()
	check(err)
	v, err := exec.Command("haproxy", "-v").Output() // "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - ..."
	check(err)
	f := strings.Fields(string(v))
	return fmt.Sprintf("HAProxy %s (Debian %s)", strings.SplitN(f[2], "-", 2)[0], deb)
}

// recordRefusals runs haproxy -c on each refused section and writes refused-<what>.cfg with
// HAProxy's messages as comments after the section (so the line numbers they quote stay
// right); the sections HAProxy accepts are only printed.
func recordRefusals(dir, work string) {
	base := filepath.Join(work, "check.cfg")
	check(os.WriteFile(base, []byte("global\n    maxconn 100\n\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\nfrontend f\n    bind 127.0.0.1:20081\n    default_backend refused\n"), 0o644))
	fmt.Println("== refused backend sections (haproxy -c)")
	for _, r := range refusals {
		path := filepath.Join(dir, "refused-"+r.what+".cfg")
		check(os.WriteFile(path, []byte(r.section), 0o644))
		msgs, ok := haproxyCheck(base, path, dir)
		if ok {
			check(fmt.Errorf("haproxy -c accepts refused-%s.cfg", r.what))
		}
		check(os.WriteFile(path, []byte(r.section+"# haproxy -c says:\n#   "+strings.Join(msgs, "\n#   ")+"\n"), 0o644))
		fmt.Printf("refused-%s.cfg:\n  %s\n", r.what, strings.Join(msgs, "\n  "))
	}
	fmt.Println("== accepted although odd (haproxy -c)")
	for _, r := range accepted {
		path := filepath.Join(work, "accepted-"+r.what+".cfg")
		check(os.WriteFile(path, []byte(r.section), 0o644))
		msgs, ok := haproxyCheck(base, path, work)
		if !ok {
			check(fmt.Errorf("haproxy -c refuses %s: %v", r.what, msgs))
		}
		fmt.Printf("%s: accepted\n  %s\n", r.what, strings.Join(msgs, "\n  "))
	}
}

// pidField is the process id HAProxy prints in every message.
var pidField = regexp.MustCompile(`\s*\(\d+\)\s*:`)

// haproxyCheck runs haproxy -c and returns its [ALERT] and [WARNING] lines, without the
// process id and with file names relative to dir.
func haproxyCheck(base, path, dir string) ([]string, bool) {
	out, err := exec.Command("haproxy", "-c", "-f", base, "-f", path).CombinedOutput()
	var msgs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "[ALERT]") || strings.HasPrefix(l, "[WARNING]") {
			l = pidField.ReplaceAllString(l, " :")
			msgs = append(msgs, strings.ReplaceAll(l, dir+"/", ""))
		}
	}
	if len(msgs) == 0 {
		msgs = []string{"(no message)"}
	}
	return msgs, err == nil
}

func readKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if t == "-" {
			keys = append(keys, "")
			continue
		}
		k, err := hexDecode(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
