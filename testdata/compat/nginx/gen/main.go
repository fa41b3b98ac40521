// Command gen makes the nginx compatibility vectors: it writes every upstream block of
// configs.go into -dir, starts nginx with those blocks included verbatim, sends every key of
// keys.txt through nginx's front door, and writes which server line answered. It also
// records the configurations nginx refuses and prints what it observed about header values,
// the empty key, failures and multi-address servers (quoted in the README).
//
// Run it through gen.sh: it expects a private network namespace (fixed ports, port 80,
// 127.0.0.2 and ::1 are all its own) and a private /etc/hosts where localhost is both
// 127.0.0.1 and ::1.
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
	"sort"
	"strings"
	"syscall"
	"time"
)

const front = "127.0.0.1:20080" // nginx's front door inside the private namespace

func main() {
	dir := flag.String("dir", "", "output directory (testdata/compat/nginx)")
	keysPath := flag.String("keys", "", "keys.txt")
	work := flag.String("work", "", "scratch directory for nginx.conf, logs and the pid file")
	flag.Parse()
	if *dir == "" || *keysPath == "" || *work == "" {
		log.Fatal("usage: gen -dir DIR -keys keys.txt -work SCRATCH")
	}
	keys, err := readKeys(*keysPath)
	check(err)
	version := systemVersion()

	ups := upstreams()
	for _, u := range ups {
		check(os.WriteFile(filepath.Join(*dir, u.name+".conf"), []byte(u.block()), 0o644))
	}
	// Upstreams for the observations only (not committed): a dead server instead of a
	// down one, to show that a failure moves keys exactly as "down" does.
	extra := []upstream{
		{"obs-hash-dead", false, deadVariant(serverSet("down"))},
		{"obs-chash-dead", true, deadVariant(serverSet("down"))},
	}
	for _, u := range extra {
		check(os.WriteFile(filepath.Join(*work, u.name+".conf"), []byte(u.block()), 0o644))
	}

	conf := nginxConf(*dir, *work, append(append([]upstream{}, ups...), extra...))
	confPath := filepath.Join(*work, "nginx.conf")
	check(os.WriteFile(confPath, []byte(conf), 0o644))
	stop := startNginx(*work, confPath)
	defer stop()

	c := dial()
	defer c.close()
	for _, u := range ups {
		check(writeVectors(c, *dir, version, u, keys))
	}
	observe(c, keys, *dir)
	stop()

	recordRefusals(*dir, *work)
}

// block renders the upstream block as a user writes it.
func (u upstream) block() string {
	var b strings.Builder
	fmt.Fprintf(&b, "upstream %s {\n", u.name)
	if u.consistent {
		b.WriteString("    hash $key consistent;\n")
	} else {
		b.WriteString("    hash $key;\n")
	}
	for _, s := range u.servers {
		fmt.Fprintf(&b, "    server %s;\n", s)
	}
	b.WriteString("}\n")
	return b.String()
}

func serverSet(suffix string) []string {
	for _, s := range serverSets {
		if s.suffix == suffix {
			return s.servers
		}
	}
	panic("no server set " + suffix)
}

// deadVariant replaces each "down" server by an address nobody listens on.
func deadVariant(servers []string) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		if strings.HasSuffix(s, " down") {
			s = fmt.Sprintf("127.0.0.1:%d", 31090+i)
		}
		out[i] = s
	}
	return out
}

// address is the address part of a server line ("127.0.0.1:31001 weight=2" -> "127.0.0.1:31001").
func address(server string) string { return strings.Fields(server)[0] }

// listeners returns the addresses nginx connects to for a server address as written, in
// the canonical form nginx prints in $upstream_addr: "ip:port", "[ip6]:port", "unix:path".
func listeners(addr string) []string {
	if strings.HasPrefix(addr, "unix:") {
		return []string{addr}
	}
	host, port := addr, "80"
	if i := strings.LastIndexByte(addr, ':'); i >= 0 && !strings.HasSuffix(addr, "]") {
		host, port = addr[:i], addr[i+1:]
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	ips, err := net.LookupIP(host)
	check(err)
	var out []string
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip.String(), port))
	}
	sort.Strings(out)
	return out
}

// nginxConf is the whole nginx configuration: the committed upstream blocks included as
// they are, one front door that proxies to the upstream named by X-Cfg, and one responder
// per backend address that answers with that address.
func nginxConf(dir, work string, ups []upstream) string {
	var b strings.Builder
	fmt.Fprintf(&b, `user root;
worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log notice;
events { worker_connections 1024; }
http {
    access_log off;
    default_type text/plain;
    keepalive_requests 1000000;
    # $key is the X-Key header between its brackets: nginx trims a header value's leading
    # and trailing blanks, the brackets keep them part of the key.
    map $http_x_key $key {
        "~^\[(?<k>.*)\]$" $k;
        default "";
    }
`, work)
	for _, u := range ups {
		d := dir
		if strings.HasPrefix(u.name, "obs-") {
			d = work
		}
		fmt.Fprintf(&b, "    include %s;\n", filepath.Join(d, u.name+".conf"))
	}
	fmt.Fprintf(&b, `    server {
        listen %s;
        location / {
            proxy_pass http://$http_x_cfg;
            proxy_next_upstream off;
            add_header X-Up $upstream_addr always;
        }
        location /retry {
            proxy_pass http://$http_x_cfg;
            proxy_next_upstream error;
            add_header X-Up $upstream_addr always;
        }
        location = /echo {
            return 200 "[$http_x_key]";
        }
    }
`, front)
	seen := map[string]bool{}
	for _, u := range ups {
		for _, s := range u.servers {
			for _, l := range listeners(address(s)) {
				if seen[l] || strings.HasPrefix(u.name, "obs-") && strings.HasPrefix(l, "127.0.0.1:3109") {
					continue // the dead addresses of the observations stay dead
				}
				seen[l] = true
				fmt.Fprintf(&b, "    server { listen %s; location / { return 200 \"%s\"; } }\n", l, l)
			}
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// startNginx runs nginx in the foreground as a child and waits for the front door.
func startNginx(work, conf string) (stop func()) {
	cmd := exec.Command("nginx", "-e", filepath.Join(work, "error.log"), "-p", work, "-c", conf)
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
	log.Fatal("nginx did not open its front door; see error.log in the scratch directory")
	return nil
}

// writeVectors sends every key through upstream u and writes <u.name>.txt.
func writeVectors(c *client, dir, version string, u upstream, keys []string) error {
	line := map[string]int{} // listener -> server index
	var names []string
	for i, s := range u.servers {
		a := address(s)
		names = append(names, fmt.Sprintf("%d=%s", i, a))
		for _, l := range listeners(a) {
			if _, dup := line[l]; dup {
				return fmt.Errorf("%s: two server lines reach %s", u.name, l)
			}
			line[l] = i
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# system: %s, upstream %s of %s.conf\n", version, u.name, u.name)
	b.WriteString("# front door: GET through nginx with the header \"X-Key: [<key>]\"; $key is the text between the brackets; the backend that answered names its listen address\n")
	fmt.Fprintf(&b, "# servers: %s\n", strings.Join(names, " "))
	b.WriteString("# skipped: 0 (the empty key: nginx hashes no empty key, it falls back to round robin)\n")
	for i, k := range keys {
		if k == "" {
			continue
		}
		r, err := c.get("/", [][2]string{{"X-Cfg", u.name}, {"X-Key", "[" + k + "]"}})
		if err != nil {
			return fmt.Errorf("%s key %d: %v", u.name, i, err)
		}
		if r.status != 200 || r.body != r.header("X-Up") {
			return fmt.Errorf("%s key %d: status %d, body %q, X-Up %q", u.name, i, r.status, r.body, r.header("X-Up"))
		}
		idx, ok := line[r.body]
		if !ok {
			return fmt.Errorf("%s key %d: answered by %s, not a server of the upstream", u.name, i, r.body)
		}
		fmt.Fprintf(&b, "%d %d\n", i, idx)
	}
	return os.WriteFile(filepath.Join(dir, u.name+".txt"), []byte(b.String()), 0o644)
}

func systemVersion() string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "nginx").Output()
	check(err)
	v, err := exec.Command("nginx", "-v").CombinedOutput() // "nginx version: nginx/1.22.1"
	check(err)
	up := strings.TrimPrefix(strings.TrimSpace(string(v)), "nginx version: nginx/")
	return fmt.Sprintf("nginx %s (Debian %s)", up, out)
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
