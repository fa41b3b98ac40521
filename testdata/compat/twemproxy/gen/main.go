// Command gen makes the twemproxy (nutcracker) compatibility vectors in its parent directory:
// for each configuration it writes the nutcracker.yml, starts nutcracker on it in front of
// redis-servers, SETs every key of ../../keys.txt through the proxy, SCANs every backend and
// writes which server holds each key. It also records the configurations nutcracker refuses,
// with its own messages. Run it through ../gen.sh, which gives it a private network namespace.
package main

import (
	"bufio"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", "..", "where to write the configurations and vectors")
	keysPath := flag.String("keys", "../../keys.txt", "the shared key set")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("twemproxy gen: ")

	runtime.LockOSThread() // the servers' Pdeathsig follows the thread that started them
	p := &procs{}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; p.stopAll(); log.Fatal("interrupted") }()

	err := run(p, *dir, *keysPath)
	p.stopAll()
	if err != nil {
		log.Fatal(err)
	}
}

func run(p *procs, dir, keysPath string) error {
	keys, err := readKeys(keysPath)
	if err != nil {
		return err
	}
	system, err := versions()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "twemproxy-gen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.RemoveAll(sockDir); err != nil {
		return err
	}
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(sockDir)

	// From scratch: every generated file goes, README.md and gen/ stay.
	for _, pat := range []string{"*.yml", "*.txt"} {
		old, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}

	backends, err := startBackends(p, tmp)
	if err != nil {
		return err
	}
	tie := findTie(keys)
	log.Printf("tie names: %q %q", tie[0], tie[1])
	for _, c := range configs(tie) {
		if err := vector(p, dir, tmp, system, keys, backends, c); err != nil {
			return fmt.Errorf("%s: %w", c.file, err)
		}
	}
	if err := randomDistribution(p, tmp, keys, backends); err != nil {
		return err
	}
	for _, r := range refusals() {
		if err := refuse(p, dir, tmp, r); err != nil {
			return fmt.Errorf("refused-%s: %w", r.stem, err)
		}
	}
	return nil
}

// readKeys reads keys.txt: hex per line, "-" for the empty key, # comments.
func readKeys(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || line[0] == '#':
		case line == "-":
			keys = append(keys, []byte{})
		default:
			k, err := hex.DecodeString(line)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			keys = append(keys, k)
		}
	}
	return keys, sc.Err()
}

// versions names the installed system for the vector headers.
func versions() (string, error) {
	v := func(pkg string) (string, error) {
		out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
		return string(out), err
	}
	nc, err := v("nutcracker")
	if err != nil {
		return "", fmt.Errorf("nutcracker is not installed: %w", err)
	}
	rs, err := v("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server is not installed: %w", err)
	}
	nv, _ := exec.Command("nutcracker", "--version").CombinedOutput()
	name := strings.TrimPrefix(strings.SplitN(string(nv), "\n", 2)[0], "This is ")
	name = strings.Replace(name, "-", " ", 1)
	return fmt.Sprintf("%s (Debian %s) with redis-server %s backends", name, nc, rs), nil
}

// startBackends starts one redis-server per backend address used anywhere: ten on
// firstPort.., one on 11211, two on unix sockets.
func startBackends(p *procs, tmp string) ([]string, error) {
	var addrs []string
	for i := range nTCP {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", firstPort+i))
	}
	addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port11211))
	addrs = append(addrs, sockDir+"/s1.sock", sockDir+"/s2.sock")
	for i, a := range addrs {
		data := filepath.Join(tmp, fmt.Sprintf("redis-%d", i))
		if err := os.Mkdir(data, 0o700); err != nil {
			return nil, err
		}
		args := []string{"--save", "", "--appendonly", "no", "--dir", data, "--daemonize", "no", "--databases", "1"}
		if a[0] == '/' {
			args = append(args, "--port", "0", "--unixsocket", a, "--unixsocketperm", "700")
		} else {
			host, port, _ := strings.Cut(a, ":")
			args = append(args, "--bind", host, "--port", port)
		}
		_, done, err := p.start("", data+".log", "redis-server", args...)
		if err != nil {
			return nil, err
		}
		if err := waitReady(a, done, true); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

func flushAll(backends []string) error {
	for _, b := range backends {
		c, err := dial(b)
		if err != nil {
			return err
		}
		r, err := c.do("FLUSHALL")
		c.Close()
		if err != nil || r.status != "OK" {
			return fmt.Errorf("FLUSHALL on %s: %v %+v", b, err, r)
		}
	}
	return nil
}

// startPool writes c to path, empties every backend and starts nutcracker on path.
func startPool(p *procs, tmp, path string, c config, backends []string) (*exec.Cmd, error) {
	if err := os.WriteFile(path, []byte(c.yaml()), 0o644); err != nil {
		return nil, err
	}
	if err := flushAll(backends); err != nil {
		return nil, err
	}
	return startNutcracker(p, tmp, path)
}

// startNutcracker runs nutcracker on one config file and waits until it listens.
func startNutcracker(p *procs, tmp, path string) (*exec.Cmd, error) {
	logPath := filepath.Join(tmp, "nutcracker.log")
	cmd, done, err := p.start("", logPath+".out", "nutcracker", "-c", path, "-o", logPath,
		"-s", statsPort, "-a", "127.0.0.1", "-p", filepath.Join(tmp, "nutcracker.pid"))
	if err != nil {
		return nil, err
	}
	if err := waitReady(listenAddr, done, false); err != nil {
		out, _ := os.ReadFile(logPath)
		p.stop(cmd)
		return nil, fmt.Errorf("%w; its log:\n%s", err, out)
	}
	return cmd, nil
}

// carry SETs every key through the proxy (value: its index) and reads it back with GET.
// It returns, per key, "" when the key went through, else why not.
func carry(keys [][]byte) ([]string, error) {
	why := make([]string, len(keys))
	const chunk = 100
	for lo := 0; lo < len(keys); lo += chunk {
		hi := min(lo+chunk, len(keys))
		if err := setChunk(keys, lo, hi, why); err != nil {
			// Nutcracker closes the connection on a request it cannot parse: find the
			// culprit key by key.
			for i := lo; i < hi; i++ {
				if err := setChunk(keys, i, i+1, why); err != nil {
					why[i] = "nutcracker closed the connection: " + err.Error()
				}
			}
		}
	}
	c, err := dial(listenAddr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for i, k := range keys {
		if why[i] == "" {
			c.send([]byte("GET"), k)
		}
	}
	if err := c.flush(); err != nil {
		return nil, err
	}
	for i := range keys {
		if why[i] != "" {
			continue
		}
		r, err := c.read()
		if err != nil {
			return nil, fmt.Errorf("GET key %d: %w", i, err)
		}
		if string(r.bulk) != strconv.Itoa(i) {
			return nil, fmt.Errorf("GET key %d through the proxy: %+v, want %d", i, r, i)
		}
	}
	return why, nil
}

func setChunk(keys [][]byte, lo, hi int, why []string) error {
	c, err := dial(listenAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := lo; i < hi; i++ {
		c.send([]byte("SET"), keys[i], []byte(strconv.Itoa(i)))
	}
	if err := c.flush(); err != nil {
		return err
	}
	for i := lo; i < hi; i++ {
		r, err := c.read()
		if err != nil {
			return err
		}
		switch {
		case r.err != "":
			why[i] = "nutcracker answered " + r.err
		case r.status != "OK":
			return fmt.Errorf("SET key %d: %+v", i, r)
		default:
			why[i] = ""
		}
	}
	return nil
}

// locate SCANs every backend and returns, per key, the backends holding it.
func locate(keys [][]byte, backends []string) ([][]int, error) {
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[string(k)] = i
	}
	where := make([][]int, len(keys))
	for b, addr := range backends {
		found, err := scanAll(addr)
		if err != nil {
			return nil, err
		}
		for _, k := range found {
			i, ok := index[string(k)]
			if !ok {
				return nil, fmt.Errorf("backend %s holds a key that was never set: %q", addr, k)
			}
			where[i] = append(where[i], b)
		}
	}
	return where, nil
}

// vector runs one configuration and writes <file>.yml and <file>.txt.
func vector(p *procs, dir, tmp, system string, keys [][]byte, backends []string, c config) error {
	cmd, err := startPool(p, tmp, filepath.Join(dir, c.file+".yml"), c, backends)
	if err != nil {
		return err
	}
	why, err := carry(keys)
	p.stop(cmd)
	if err != nil {
		return err
	}
	where, err := locate(keys, backends)
	if err != nil {
		return err
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# system: %s, pool %s of %s.yml\n", system, c.file, c.file)
	b.WriteString("# front door: SET through the proxy (redis: true), GET back through it, then SCAN on every backend; each key found on exactly one\n")
	b.WriteString("# servers:")
	for i, s := range c.servers {
		fmt.Fprintf(&b, " %d=%s", i, nutName(s.line))
	}
	b.WriteString("\n")
	var skipped []string
	for i, w := range why {
		if w != "" {
			skipped = append(skipped, fmt.Sprintf("%d (%s)", i, w))
		}
	}
	fmt.Fprintf(&b, "# keys: %d of %d carried\n", len(keys)-len(skipped), len(keys))
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "# skipped: %s\n", strings.Join(skipped, "; "))
	}
	for i := range keys {
		if why[i] != "" {
			if len(where[i]) != 0 {
				return fmt.Errorf("key %d was refused (%s) yet found on %v", i, why[i], where[i])
			}
			continue
		}
		if len(where[i]) != 1 {
			return fmt.Errorf("key %d found on %d backends, want exactly one", i, len(where[i]))
		}
		server := slices.IndexFunc(c.servers, func(s server) bool { return s.backend == backends[where[i][0]] })
		if server < 0 {
			return fmt.Errorf("key %d landed on %s, which is not in the pool", i, backends[where[i][0]])
		}
		fmt.Fprintf(&b, "%d %d\n", i, server)
	}
	log.Printf("%s: %d keys, %d skipped", c.file, len(keys)-len(skipped), len(skipped))
	return os.WriteFile(filepath.Join(dir, c.file+".txt"), []byte(b.String()), 0o644)
}

// nutName is the name nutcracker gives a server line (conf_add_server in src/nc_conf.c):
// the word after the last space; else host:port as written, without ":port" when the port
// is 11211; for a unix socket, its path followed by ':'.
func nutName(line string) string {
	if i := strings.LastIndexByte(line, ' '); i >= 0 {
		return line[i+1:]
	}
	addr := line[:strings.LastIndexByte(line, ':')]
	if line[0] == '/' {
		return addr + ":"
	}
	j := strings.LastIndexByte(addr, ':')
	if port, _ := strconv.Atoi(addr[j+1:]); port == port11211 {
		return addr[:j]
	}
	return addr
}

// findTie returns two server names, listed in the order that does not sort first, whose
// ketama point sets (160 points each, two servers of weight 1) share a value that at least
// one key (md5) looks up. Only the choice of names uses the rule; the vectors come from
// nutcracker.
func findTie(keys [][]byte) [2]string {
	points := func(name string) []uint32 {
		var ps []uint32
		for j := range 40 {
			d := md5.Sum([]byte(fmt.Sprintf("%s-%d", name, j)))
			for x := range 4 {
				ps = append(ps, binary.LittleEndian.Uint32(d[4*x:]))
			}
		}
		return ps
	}
	owner := map[uint32]string{}
	for i := 0; ; i++ {
		name := fmt.Sprintf("tie-%05d", i)
		mine := points(name)
		for _, v := range mine {
			other, ok := owner[v]
			if !ok || other == name {
				continue
			}
			ring := append(points(other), mine...)
			slices.Sort(ring)
			for _, k := range keys {
				if len(k) == 0 {
					continue
				}
				d := md5.Sum(k)
				h := binary.LittleEndian.Uint32(d[:])
				at, _ := slices.BinarySearch(ring, h)
				if at < len(ring) && ring[at] == v {
					return [2]string{name, other} // name > other: listed out of order
				}
			}
		}
		for _, v := range mine {
			if _, ok := owner[v]; !ok {
				owner[v] = name
			}
		}
	}
}

// randomDistribution shows why distribution: random has no vectors: it SETs every key and
// reads it back, and reports how the keys spread and how many GETs find them.
func randomDistribution(p *procs, tmp string, keys [][]byte, backends []string) error {
	c := config{file: "random-md5-3", why: "random", dist: "random", hash: "md5", servers: equal(3)}
	cmd, err := startPool(p, tmp, filepath.Join(tmp, c.file+".yml"), c, backends)
	if err != nil {
		return err
	}
	defer p.stop(cmd)
	conn, err := dial(listenAddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	for round := 0; round < 2; round++ {
		for i, k := range keys {
			if round == 0 {
				conn.send([]byte("SET"), k, []byte(strconv.Itoa(i)))
			} else {
				conn.send([]byte("GET"), k)
			}
		}
		if err := conn.flush(); err != nil {
			return err
		}
		hits := 0
		for range keys {
			r, err := conn.read()
			if err != nil {
				return err
			}
			if r.bulk != nil {
				hits++
			}
		}
		if round == 1 {
			log.Printf("random: %d of %d GETs found the key just SET", hits, len(keys))
		}
	}
	where, err := locate(keys, backends)
	if err != nil {
		return err
	}
	per := make([]int, len(backends))
	for _, w := range where {
		for _, b := range w {
			per[b]++
		}
	}
	log.Printf("random: keys per backend %v", per[:3])
	return nil
}

// refuse writes refused-<stem>.yml, checks that nutcracker -t refuses it, and puts
// nutcracker's own messages on top of the file.
func refuse(p *procs, dir, tmp string, r refusal) error {
	name := "refused-" + r.stem + ".yml"
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(r.yaml()), 0o644); err != nil {
		return err
	}
	test := exec.Command("nutcracker", "-t", "-c", name)
	test.Dir = dir
	out, err := test.CombinedOutput()
	if err == nil {
		return fmt.Errorf("nutcracker -t accepted it: %s", out)
	}
	// -t prints only a verdict; the reason goes to the log, which -t never opens. A plain
	// start logs it and exits.
	logPath := filepath.Join(tmp, "refused.log")
	os.Remove(logPath)
	cmd, done, err := p.start(dir, logPath+".out", "nutcracker", "-c", name, "-o", logPath,
		"-s", statsPort, "-a", "127.0.0.1", "-p", filepath.Join(tmp, "nutcracker.pid"))
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.stop(cmd)
		return fmt.Errorf("nutcracker started on it")
	}
	p.stop(cmd)
	logged, _ := os.ReadFile(logPath)
	var msgs []string
	for _, l := range strings.Split(string(logged), "\n") {
		// "[2026-01-02 03:04:05.678] nc_conf.c:529 conf: ..." without the time; the banner
		// lines come from nc.c.
		if _, rest, ok := strings.Cut(l, "] "); ok && !strings.HasPrefix(rest, "nc.c:") {
			msgs = append(msgs, rest)
		}
	}
	if len(msgs) == 0 {
		return fmt.Errorf("no reason in nutcracker's log:\n%s", logged)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# refused: %s\n", r.why)
	// nutcracker prints its verdict twice (log_stderr); once is enough.
	verdict, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	fmt.Fprintf(&b, "# nutcracker -t -c %s: %s\n", name, verdict)
	for _, m := range msgs {
		fmt.Fprintf(&b, "# nutcracker's log: %s\n", m)
	}
	b.WriteString(r.yaml())
	log.Printf("%s: %s", name, strings.Join(msgs, " | "))
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
