// Command gen makes the vectors of HAProxy's hash-balance-factor (consistent hashing with
// bounded loads): it writes every backend section below into -dir, starts HAProxy with them,
// plays a recorded sequence of events on each backend, and writes which server took each
// connection.
//
// The servers are this program's own slow backends: each holds every request open, so the
// connection stays counted by HAProxy, until the sequence closes it. An event is one of
//
//	open:    a new client connection sends GET /?k=<key>&c=<conn> through HAProxy's front door;
//	         the event ends when a backend receives it, which tells which server HAProxy chose;
//	close:   the backend holding <conn> answers and closes; the event ends when HAProxy's
//	         stats show that server's current sessions down by one;
//	disable, enable: `disable server` and `enable server` on HAProxy's stats socket.
//
// After every event the current sessions of every server (show stat, scur) must equal the
// connections this program holds open on it, so the next open sees exactly the loads the
// vectors say. Run it through gen.sh, in a private network namespace.
package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	front   = "127.0.0.1:20080"
	balance = "balance hash urlp(k),url_dec"
)

// backend is one section and the sequence played on it.
type backend struct {
	name     string
	lines    []string // after balance: hash-type, hash-balance-factor, server lines
	servers  int
	events   int
	maxOpen  int
	hotKeys  uint64 // keys are drawn from keys.txt[0:hotKeys] with Zipf(1.1)
	seed     uint64
	disables []toggle // at event i, disable or enable server s (0-based)
}

type toggle struct {
	at, server int
	enable     bool
	weight     int // above 0: set server weight instead
}

func (b backend) section() string {
	var s strings.Builder
	fmt.Fprintf(&s, "backend %s\n    %s\n", b.name, balance)
	for _, l := range b.lines {
		s.WriteString("    " + l + "\n")
	}
	return s.String()
}

func servers(n int, extra func(i int) string) []string {
	var out []string
	for i := range n {
		l := fmt.Sprintf("server s%d 127.0.0.1:%d", i+1, 31001+i)
		if extra != nil {
			l += extra(i)
		}
		out = append(out, l)
	}
	return out
}

func backends() []backend {
	weights := []int{1, 2, 3, 1, 5}
	ids := []int{5, 3, 1, 4, 2}
	return []backend{
		{name: "bounded-125-5", lines: append([]string{"hash-type consistent", "hash-balance-factor 125"}, servers(5, nil)...),
			servers: 5, events: 1500, maxOpen: 30, hotKeys: 100, seed: 1},
		{name: "bounded-150-weights", lines: append([]string{"hash-type consistent", "hash-balance-factor 150"},
			servers(5, func(i int) string { return fmt.Sprintf(" weight %d", weights[i]) })...),
			servers: 5, events: 1500, maxOpen: 40, hotKeys: 100, seed: 2},
		{name: "bounded-101-10", lines: append([]string{"hash-type consistent", "hash-balance-factor 101"}, servers(10, nil)...),
			servers: 10, events: 1500, maxOpen: 50, hotKeys: 200, seed: 3},
		{name: "bounded-200-ids-crc32", lines: append([]string{"hash-type consistent crc32", "hash-balance-factor 200"},
			servers(5, func(i int) string { return fmt.Sprintf(" id %d weight %d", ids[i], 1+i%2) })...),
			servers: 5, events: 1500, maxOpen: 25, hotKeys: 60, seed: 4},
		{name: "bounded-125-disable", lines: append([]string{"hash-type consistent", "hash-balance-factor 125"}, servers(5, nil)...),
			servers: 5, events: 1500, maxOpen: 30, hotKeys: 100, seed: 5,
			disables: []toggle{{at: 300, server: 2}, {at: 700, server: 2, enable: true}, {at: 900, server: 0}, {at: 1000, server: 4}, {at: 1200, server: 0, enable: true}}},
		// Only s1, s4 and s7 up: the cumulative weights HAProxy set at start leave gaps, the
		// slots can add up to less than the connections plus one, and the walk gives up.
		{name: "bounded-101-gaps", lines: append([]string{"hash-type consistent", "hash-balance-factor 101"}, servers(7, nil)...),
			servers: 7, events: 1500, maxOpen: 12, hotKeys: 50, seed: 6,
			disables: []toggle{{at: 0, server: 1}, {at: 0, server: 2}, {at: 0, server: 4}, {at: 0, server: 5}}},
		// Weights changed at run time (set server weight): points and eweights follow, the
		// cumulative weights stay those of the start.
		{name: "bounded-150-setweight", lines: append([]string{"hash-type consistent", "hash-balance-factor 150"},
			servers(5, func(i int) string { return fmt.Sprintf(" weight %d", weights[i]) })...),
			servers: 5, events: 1500, maxOpen: 40, hotKeys: 100, seed: 7,
			disables: []toggle{{at: 300, server: 1, weight: 5}, {at: 600, server: 4, weight: 1}, {at: 900, server: 0, weight: 3}, {at: 1200, server: 1, weight: 2}}},
	}
}

func main() {
	dir := flag.String("dir", "", "output directory (testdata/compat/haproxy/bounded)")
	keysPath := flag.String("keys", "", "keys.txt")
	work := flag.String("work", "", "scratch directory")
	flag.Parse()
	if *dir == "" || *keysPath == "" || *work == "" {
		log.Fatal("usage: gen -dir DIR -keys keys.txt -work SCRATCH")
	}
	keys, err := readKeys(*keysPath)
	check(err)
	version := systemVersion()
	sock := filepath.Join(*work, "stats.sock")
	files := []string{filepath.Join(*work, "base.cfg")}
	check(os.WriteFile(files[0], []byte(baseConf(sock)), 0o644))
	bes := backends()
	for _, b := range bes {
		p := filepath.Join(*dir, b.name+".cfg")
		check(os.WriteFile(p, []byte(b.section()), 0o644))
		files = append(files, p)
	}
	srv := startServers(10)
	stop := startHAProxy(files)
	defer stop()
	for _, b := range bes {
		check(play(b, keys, srv, sock, *dir, version))
	}
}

// baseConf is the global section with the stats socket, and the front door, which sends each
// request to the backend named by X-Cfg.
func baseConf(sock string) string {
	return fmt.Sprintf(`global
    maxconn 1000
    nbthread 1
    stats socket %s level admin

defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s

frontend front
    bind %s
    use_backend %%[req.hdr(X-Cfg)]
`, sock, front)
}

// arrival is a request a slow backend received: its connection number and the server.
type arrival struct {
	conn, server int
}

// slowServers are the backends: server i listens on 31001+i and holds each request until
// release[conn] is closed.
type slowServers struct {
	arrivals chan arrival
	mu       sync.Mutex
	release  map[int]chan struct{}
}

func (s *slowServers) releaseOf(conn int) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.release[conn]
	if ch == nil {
		ch = make(chan struct{})
		s.release[conn] = ch
	}
	return ch
}

var connParam = regexp.MustCompile(`[?&]c=(\d+)[& ]`)

func startServers(n int) *slowServers {
	s := &slowServers{arrivals: make(chan arrival, 100), release: map[int]chan struct{}{}}
	for i := range n {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 31001+i))
		check(err)
		go func() {
			for {
				c, err := ln.Accept()
				check(err)
				go s.serve(c, i)
			}
		}()
	}
	return s
}

func (s *slowServers) serve(c net.Conn, server int) {
	defer c.Close()
	r := bufio.NewReader(c)
	first, err := r.ReadString('\n')
	if err != nil {
		log.Printf("server %d: %v", server, err)
		return
	}
	for { // the rest of the head
		l, err := r.ReadString('\n')
		if err != nil {
			log.Printf("server %d: %v", server, err)
			return
		}
		if l == "\r\n" {
			break
		}
	}
	m := connParam.FindStringSubmatch(first)
	if m == nil {
		log.Fatalf("server %d: request without c=: %q", server, first)
	}
	conn, _ := strconv.Atoi(m[1])
	s.arrivals <- arrival{conn, server}
	<-s.releaseOf(conn)
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

// play runs b's sequence and writes <b.name>.txt.
func play(b backend, keys []string, srv *slowServers, sock, dir, version string) error {
	r := rand.New(rand.NewPCG(b.seed, 25))
	zipf := rand.NewZipf(r, 1.1, 1, b.hotKeys-1)
	var out strings.Builder
	var names []string
	for i := range b.servers {
		names = append(names, fmt.Sprintf("%d=s%d", i, i+1))
	}
	fmt.Fprintf(&out, "# system: %s, backend %s of %s.cfg\n", version, b.name, b.name)
	out.WriteString("# front door: one client connection per open, GET /?k=<key, percent-encoded>&c=<conn> (" + balance + " hashes exactly the key); the servers hold every request until its close\n")
	fmt.Fprintf(&out, "# servers: %s\n", strings.Join(names, " "))
	out.WriteString("# events: o <conn> <key index> <server index>: an open went to that server; c <conn> <server index>: its close; d/e <server index>: disable/enable server on the stats socket; w <server index> <weight>: set server weight\n")
	type open struct {
		client net.Conn
		server int
	}
	opens := map[int]open{}
	var order []int // open connections, for picking one to close
	load := make([]int, b.servers)
	rising := true
	next := 0 // connection numbers are global across backends, so a late arrival cannot be mistaken
	base := connBase
	toggles := b.disables
	for ev := range b.events {
		for len(toggles) > 0 && toggles[0].at == ev {
			tg := toggles[0]
			toggles = toggles[1:]
			if tg.weight > 0 {
				if reply := stats(sock, fmt.Sprintf("set server %s/s%d weight %d", b.name, tg.server+1, tg.weight)); strings.TrimSpace(reply) != "" {
					return fmt.Errorf("%s: set server s%d weight %d: %q", b.name, tg.server+1, tg.weight, reply)
				}
				fmt.Fprintf(&out, "w %d %d\n", tg.server, tg.weight)
				continue
			}
			cmd, tag := "disable", "d"
			if tg.enable {
				cmd, tag = "enable", "e"
			}
			if reply := stats(sock, fmt.Sprintf("%s server %s/s%d", cmd, b.name, tg.server+1)); strings.TrimSpace(reply) != "" {
				return fmt.Errorf("%s: %s server s%d: %q", b.name, cmd, tg.server+1, reply)
			}
			fmt.Fprintf(&out, "%s %d\n", tag, tg.server)
		}
		if len(order) >= b.maxOpen {
			rising = false
		} else if len(order) <= 2 {
			rising = true
		}
		p := 0.3
		if rising {
			p = 0.7
		}
		if len(order) == 0 || r.Float64() < p {
			key := int(zipf.Uint64())
			conn := base + next
			next++
			c, err := net.Dial("tcp", front)
			if err != nil {
				return err
			}
			req := fmt.Sprintf("GET %s&c=%d HTTP/1.1\r\nHost: front\r\nX-Cfg: %s\r\nConnection: close\r\n\r\n", urlpPath(keys[key]), conn, b.name)
			if _, err := io.WriteString(c, req); err != nil {
				return err
			}
			var a arrival
			select {
			case a = <-srv.arrivals:
			case <-time.After(5 * time.Second):
				return fmt.Errorf("%s: open %d (key %d) reached no server", b.name, conn, key)
			}
			if a.conn != conn {
				return fmt.Errorf("%s: open %d, but server %d received %d", b.name, conn, a.server, a.conn)
			}
			opens[conn] = open{c, a.server}
			order = append(order, conn)
			load[a.server]++
			fmt.Fprintf(&out, "o %d %d %d\n", conn-base, key, a.server)
		} else {
			i := r.IntN(len(order))
			conn := order[i]
			order = append(order[:i], order[i+1:]...)
			o := opens[conn]
			delete(opens, conn)
			close(srv.releaseOf(conn))
			resp, err := io.ReadAll(o.client)
			o.client.Close()
			if err != nil || !strings.HasPrefix(string(resp), "HTTP/1.1 200") {
				return fmt.Errorf("%s: close %d: %q %v", b.name, conn, resp, err)
			}
			load[o.server]--
			fmt.Fprintf(&out, "c %d %d\n", conn-base, o.server)
		}
		if err := waitLoads(sock, b, load); err != nil {
			return fmt.Errorf("%s: after event %d: %v", b.name, ev, err)
		}
	}
	for _, conn := range order { // close the rest, unrecorded
		o := opens[conn]
		close(srv.releaseOf(conn))
		_, _ = io.ReadAll(o.client)
		o.client.Close()
		load[o.server]--
	}
	if err := waitLoads(sock, b, load); err != nil {
		return err
	}
	connBase += 100000
	fmt.Printf("%s: %d events\n", b.name, b.events)
	return os.WriteFile(filepath.Join(dir, b.name+".txt"), []byte(out.String()), 0o644)
}

var connBase = 0

// waitLoads polls HAProxy's stats until every server's current sessions equal load.
func waitLoads(sock string, b backend, load []int) error {
	var got []int
	for range 2000 {
		got = scur(sock, b)
		same := len(got) == len(load)
		for i := range load {
			same = same && got[i] == load[i]
		}
		if same {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("HAProxy counts %v sessions, the servers hold %v", got, load)
}

// scur returns the current sessions of b's servers from show stat.
func scur(sock string, b backend) []int {
	out := make([]int, b.servers)
	lines := strings.Split(stats(sock, "show stat"), "\n")
	col := -1
	for _, l := range lines {
		f := strings.Split(l, ",")
		if strings.HasPrefix(l, "# ") {
			for i, h := range f {
				if h == "scur" {
					col = i
				}
			}
			continue
		}
		if len(f) <= col || f[0] != b.name || !strings.HasPrefix(f[1], "s") {
			continue
		}
		i, err := strconv.Atoi(f[1][1:])
		if err != nil || i < 1 || i > b.servers {
			continue
		}
		out[i-1], _ = strconv.Atoi(f[col])
	}
	return out
}

// stats sends one command to the stats socket and returns the answer.
func stats(sock, cmd string) string {
	c, err := net.Dial("unix", sock)
	check(err)
	defer c.Close()
	_, err = io.WriteString(c, cmd+"\n")
	check(err)
	b, err := io.ReadAll(c)
	check(err)
	return string(b)
}

func startHAProxy(files []string) (stop func()) {
	args := []string{"-db"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	cmd := exec.Command("haproxy", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	check(cmd.Start())
	stop = func() {
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

// urlpPath is the path that carries key k in the query argument k, every byte but the
// unreserved ones percent-encoded, so url_dec gives back exactly k.
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

func systemVersion() string {
	deb, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "haproxy").Output()
	check(err)
	v, err := exec.Command("haproxy", "-v").Output()
	check(err)
	f := strings.Fields(string(v))
	return fmt.Sprintf("HAProxy %s (Debian %s)", strings.SplitN(f[2], "-", 2)[0], deb)
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
		k, err := hex.DecodeString(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		keys = append(keys, string(k))
	}
	return keys, sc.Err()
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
