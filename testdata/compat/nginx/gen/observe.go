package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// observe prints what the README quotes: how nginx hands a header value to $http_x_key,
// what it does with the empty key, that a failed server moves keys exactly as "down" does,
// and how a server line with two addresses shares its keys.
func observe(c *client, keys []string, dir string) {
	fmt.Println("== header values as $http_x_key sees them (GET /echo answers \"[$http_x_key]\")")
	for _, v := range []string{"  padded  ", "\ttabs\t", "in  side", "a,b", "naïve", "", "   ", "a\x00b", "a\x01b", "a\x7fb", "a\xffb"} {
		r, err := c.get("/echo", [][2]string{{"X-Key", v}})
		if err != nil {
			fmt.Printf("X-Key %q: %v\n", v, err)
			_ = c.redial()
			continue
		}
		fmt.Printf("X-Key %q: status %d body %q\n", v, r.status, r.body)
	}
	r, _ := c.get("/echo", nil)
	fmt.Printf("no X-Key: status %d body %q\n", r.status, r.body)

	fmt.Println("== the empty key: which server answers 10 requests in a row")
	for _, name := range []string{"hash-5", "chash-5"} {
		for _, hdr := range [][][2]string{{{"X-Cfg", name}, {"X-Key", "[]"}}, {{"X-Cfg", name}}} {
			var got []string
			for range 10 {
				r, err := c.get("/", hdr)
				check(err)
				got = append(got, r.body)
			}
			fmt.Printf("%s, X-Key present=%v: %s\n", name, len(hdr) == 2, strings.Join(got, " "))
		}
	}

	fmt.Println("== a server nobody listens on instead of a down one (proxy_next_upstream error)")
	for _, p := range [][2]string{{"obs-hash-dead", "hash-down"}, {"obs-chash-dead", "chash-down"}} {
		want := readVectors(filepath.Join(dir, p[1]+".txt"))
		servers := deadVariant(serverSet("down"))
		same, retried, total := 0, 0, 0
		for i, k := range keys {
			if k == "" {
				continue
			}
			r, err := c.get("/retry", [][2]string{{"X-Cfg", p[0]}, {"X-Key", "[" + k + "]"}})
			check(err)
			if strings.Contains(r.header("X-Up"), ",") {
				retried++
			}
			total++
			if w, ok := want[i]; ok && r.body == address(servers[w]) {
				same++
			}
		}
		fmt.Printf("%s: %d of %d keys answered by the server %s.txt names (%d requests tried the dead server first)\n",
			p[0], same, total, p[1], retried)
	}

	fmt.Println("== one server line, two addresses (localhost is ::1 and 127.0.0.1)")
	for _, name := range []string{"hash-localhost", "chash-localhost", "hash-localhost-weights", "chash-localhost-weights"} {
		count := map[string]int{}
		for _, k := range keys {
			if k == "" {
				continue
			}
			r, err := c.get("/", [][2]string{{"X-Cfg", name}, {"X-Key", "[" + k + "]"}})
			check(err)
			count[r.body]++
		}
		fmt.Printf("%s: answers per address %v\n", name, count)
	}
}

// readVectors reads a vector file into key index -> server index.
func readVectors(path string) map[int]int {
	f, err := os.Open(path)
	check(err)
	defer f.Close()
	m := map[int]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		t := sc.Text()
		if strings.HasPrefix(t, "#") {
			continue
		}
		fs := strings.Fields(t)
		k, err1 := strconv.Atoi(fs[0])
		s, err2 := strconv.Atoi(fs[1])
		if err1 != nil || err2 != nil {
			check(fmt.Errorf("%s: bad line %q", path, t))
		}
		m[k] = s
	}
	check(sc.Err())
	return m
}

// recordRefusals runs nginx -t on each refused block and writes refused-<what>.conf with
// nginx's message as its first line; the blocks nginx accepts are only printed.
func recordRefusals(dir, work string) {
	fmt.Println("== refused upstream blocks (nginx -t)")
	for _, r := range refusals {
		path := filepath.Join(dir, "refused-"+r.what+".conf")
		// The message names a line of the file, so the file must already have its
		// comment line when nginx reads it.
		check(os.WriteFile(path, []byte("# nginx -t: ?\n"+r.block), 0o644))
		msg, ok := nginxTest(work, path)
		if ok {
			check(fmt.Errorf("nginx -t accepts refused-%s.conf: %s", r.what, msg))
		}
		msg = strings.ReplaceAll(msg, dir+"/", "")
		check(os.WriteFile(path, []byte("# nginx -t: "+msg+"\n"+r.block), 0o644))
		fmt.Printf("refused-%s.conf: %s\n", r.what, msg)
	}
	fmt.Println("== accepted although odd (nginx -t)")
	for _, r := range accepted {
		path := filepath.Join(work, "accepted-"+r.what+".conf")
		check(os.WriteFile(path, []byte(r.block), 0o644))
		msg, ok := nginxTest(work, path)
		if !ok {
			check(fmt.Errorf("nginx -t refuses %s: %s", r.what, msg))
		}
		fmt.Printf("%s: accepted; %s\n", r.what, strings.ReplaceAll(msg, work+"/", ""))
	}
}

// logLine is one [emerg] or [warn] line of nginx's error log, without its time and pid.
var logLine = regexp.MustCompile(`^\S+ \S+ (\[(?:emerg|warn)\]) \d+#\d+: (.*)$`)

// nginxTest runs nginx -t on a configuration that includes the upstream block in path and
// returns nginx's first [emerg] or [warn] line (or "no message") and whether it passed.
func nginxTest(work, path string) (string, bool) {
	conf := filepath.Join(work, "test.conf")
	check(os.WriteFile(conf, []byte(fmt.Sprintf(`pid %[1]s/test.pid;
events { }
http {
    map $http_x_key $key { default ""; }
    include %[2]s;
    server { listen 127.0.0.1:20081; location / { proxy_pass http://$http_x_cfg; } }
}
`, work, path)), 0o644))
	out, err := exec.Command("nginx", "-e", "stderr", "-t", "-p", work, "-c", conf).CombinedOutput()
	msg := "no message"
	for _, l := range strings.Split(string(out), "\n") {
		if m := logLine.FindStringSubmatch(l); m != nil {
			msg = "nginx: " + m[1] + " " + m[2] // as nginx -t prints it on a terminal
			break
		}
	}
	return msg, err == nil
}
