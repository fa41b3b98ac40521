package gomemcache

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

// These tests run real memcached servers on 127.0.0.1 and a real libmemcached client (the
// small C program testdata/lmwhere.c, built here with gcc against Debian's libmemcached-dev):
// every key of testdata/compat/keys.txt is SET through gomemcache with a Selector, each
// server is then asked for every key, and libmemcached is asked where it looks for each key
// and what it finds there. They skip when memcached, gcc or libmemcached-dev is missing,
// and fail instead when SHARD_REQUIRE_MEMCACHED=1 (as CI sets it, after installing them).

// needs skips the test, or fails it under SHARD_REQUIRE_MEMCACHED=1, when what is missing.
func needs(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s is missing (apt-get install memcached libmemcached-dev gcc): %v", what, err)
	if os.Getenv("SHARD_REQUIRE_MEMCACHED") == "1" {
		t.Fatal(msg + "; SHARD_REQUIRE_MEMCACHED=1 requires it")
	}
	t.Skip(msg)
}

// startMemcached starts n memcached servers on 127.0.0.1 at free ports, stopped when the
// test ends, and returns their addresses.
func startMemcached(t *testing.T, n int) []string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	needs(t, "memcached", err)
	var addrs []string
	for range n {
		addrs = append(addrs, startOne(t, bin))
	}
	return addrs
}

func startOne(t *testing.T, bin string) string {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		_, port, _ := net.SplitHostPort(addr)
		args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "64", "-t", "1"}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "nobody") // memcached refuses to run as root without -u
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() { cmd.Process.Kill(); <-exited }
		for range 50 {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Cleanup(stop)
				return addr
			}
			select {
			case <-exited:
			case <-time.After(50 * time.Millisecond):
				continue
			}
			break // it exited: the port was taken meanwhile
		}
		stop()
	}
	t.Fatal("could not start memcached on a free port")
	return ""
}

// buildLmwhere compiles testdata/lmwhere.c against libmemcached.
func buildLmwhere(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("gcc")
	needs(t, "gcc", err)
	_, err = os.Stat("/usr/include/libmemcached-1.0/memcached.h")
	needs(t, "libmemcached-dev", err)
	bin := filepath.Join(t.TempDir(), "lmwhere")
	out, err := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/lmwhere.c", "-lmemcached").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc lmwhere.c: %v\n%s", err, out)
	}
	return bin
}

// compatKeys returns the keys of testdata/compat/keys.txt that memcached's text protocol
// carries, and how many it left out and why: gomemcache refuses keys over 250 bytes and
// keys with a space, a control byte or DEL (memcache.ErrMalformedKey), and memcached refuses
// the empty key.
func compatKeys(t *testing.T) (keys []string, skipped map[string]int) {
	t.Helper()
	data, err := os.ReadFile("../../testdata/compat/keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	skipped = map[string]int{}
	total := 0
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		total++
		if line == "-" {
			skipped["empty"]++
			continue
		}
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(b) > 250:
			skipped["over 250 bytes"]++
		case bytes.ContainsFunc(b, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			skipped["space or control byte"]++
		default:
			keys = append(keys, string(b))
		}
	}
	if total != 2000 {
		t.Fatalf("keys.txt holds %d keys, want 2000", total)
	}
	return keys, skipped
}

// TestKetamaWithLibmemcached: a gomemcache client with NewKetama and a libmemcached client
// with MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED over the same five servers, then six after Add;
// and a compat preset from a libmemcached configuration string with weights.
func TestKetamaWithLibmemcached(t *testing.T) {
	addrs := startMemcached(t, 6)
	lmwhere := buildLmwhere(t)
	keys, skipped := compatKeys(t)
	t.Logf("keys: %d carried, skipped %v", len(keys), skipped)
	if len(keys) != 1671 || skipped["empty"] != 1 || skipped["over 250 bytes"] != 5 || skipped["space or control byte"] != 323 {
		t.Fatalf("want 1671 keys carried, 1 empty, 5 over 250 bytes and 323 with a space or control byte skipped")
	}
	servers := func(addrs []string, weights ...int) string {
		var b strings.Builder
		for i, a := range addrs {
			fmt.Fprintf(&b, " --SERVER=%s", a)
			if weights != nil {
				fmt.Fprintf(&b, "/?%d", weights[i])
			}
		}
		return strings.TrimSpace(b.String())
	}

	sel, err := NewKetama(addrs[:5]...)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ketama, 5 servers", sel, addrs[:5], keys, lmwhere, servers(addrs[:5]), "ketama-weighted")

	if err := sel.Add(pool.Node{Name: addrs[5]}); err != nil {
		t.Fatal(err)
	}
	check(t, "ketama, 6 servers after Add", sel, addrs, keys, lmwhere, servers(addrs), "ketama-weighted")

	config := "--DISTRIBUTION=consistent --HASH=MD5 " + servers(addrs[:4], 1, 2, 1, 3)
	cfg, err := compat.ParseLibmemcached([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	p, err := compat.NewLibmemcached(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sel, err = New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "compat.NewLibmemcached of "+config, sel, addrs[:4], keys, lmwhere, config, "")
}

// check flushes the servers, SETs every key through gomemcache with sel, asks each server
// for every key, and asks libmemcached (lmwhere with config and flag) where it finds each.
func check(t *testing.T, name string, sel *Selector, addrs, keys []string, lmwhere, config, flag string) {
	t.Helper()
	client := memcache.NewFromSelector(sel)
	if err := client.FlushAll(); err != nil { // through Each: every server of the selector
		t.Fatalf("%s: FlushAll: %v", name, err)
	}
	value := func(i int) string { return fmt.Sprintf("%s#%d", name[:6], i) }
	for i, k := range keys {
		if err := client.Set(&memcache.Item{Key: k, Value: []byte(value(i))}); err != nil {
			t.Fatalf("%s: SET %q: %v", name, k, err)
		}
	}

	// Every server, alone: each key must be on exactly one, the one the selector picks.
	where := make([]string, len(keys))
	perServer := map[string]int{}
	for _, a := range addrs {
		one := memcache.New(a)
		for start := 0; start < len(keys); start += 200 {
			got, err := one.GetMulti(keys[start:min(start+200, len(keys))])
			if err != nil {
				t.Fatalf("%s: GetMulti on %s: %v", name, a, err)
			}
			for j, k := range keys[start:min(start+200, len(keys))] {
				it, ok := got[k]
				if !ok {
					continue
				}
				i := start + j
				if string(it.Value) != value(i) {
					t.Fatalf("%s: %s holds %q = %q, want %q", name, a, k, it.Value, value(i))
				}
				if where[i] != "" {
					t.Fatalf("%s: key %q on %s and on %s", name, k, where[i], a)
				}
				where[i] = a
				perServer[a]++
			}
		}
	}
	for i, k := range keys {
		picked, err := sel.PickServer(k)
		if err != nil {
			t.Fatal(err)
		}
		if where[i] != picked.String() {
			t.Fatalf("%s: key %q is on %q, the selector picks %s", name, k, where[i], picked)
		}
	}

	// libmemcached: the server it names for each key, and what it reads there.
	args := []string{config}
	if flag != "" {
		args = append(args, flag)
	}
	cmd := exec.Command(lmwhere, args...)
	var in bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&in, "%x\n", k)
	}
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: lmwhere: %v", name, err)
	}
	agree := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := 0; sc.Scan(); i++ {
		f := strings.Fields(sc.Text())
		if i >= len(keys) || len(f) != 3 || f[0] != hex.EncodeToString([]byte(keys[i])) {
			t.Fatalf("%s: lmwhere line %d: %q", name, i+1, sc.Text())
		}
		if f[1] != where[i] || f[2] != value(i) {
			t.Fatalf("%s: libmemcached looks for %q on %s and finds %q; gomemcache put it on %s", name, keys[i], f[1], f[2], where[i])
		}
		agree++
	}
	if agree != len(keys) {
		t.Fatalf("%s: lmwhere answered for %d keys of %d", name, agree, len(keys))
	}
	counts := make([]string, len(addrs))
	for i, a := range addrs {
		counts[i] = strconv.Itoa(perServer[a])
	}
	t.Logf("%s: %d keys, each on exactly one server (%s keys each), where libmemcached finds it", name, agree, strings.Join(counts, "/"))
}
