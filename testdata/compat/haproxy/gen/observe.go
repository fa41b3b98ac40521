package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// hdrValue is what "balance hdr(X-Key)" hashes when the header's value is v: the value up
// to its first comma outside double quotes, without the blanks around it
// (http_find_header in src/http_htx.c).
func hdrValue(v string) string {
	v = strings.TrimLeft(v, " \t")
	quoted, pair := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case pair:
			pair = false
		case quoted && c == '\\':
			pair = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			v = v[:i]
		}
	}
	return strings.TrimRight(v, " \t")
}

// observe prints what the README quotes.
func observe(c *client, keys []string, dir string, bes []backend) {
	fmt.Println("== header values as req.hdr and req.fhdr see them")
	e := dial(echo)
	defer e.close()
	for _, v := range []string{"  padded  ", "\ttabs\t", "a,b", "\"a,b\",c", " x , y ", "naïve", "", "a\x00b", "a\x01b", "a\x7fb", "a\xffb"} {
		r, err := e.get("/", [][2]string{{"X-Key", v}})
		if err != nil {
			fmt.Printf("X-Key %q: %v\n", v, err)
			_ = e.redial()
			continue
		}
		fmt.Printf("X-Key %q: status %d %q\n", v, r.status, strings.TrimSpace(r.body))
	}

	fmt.Println("== balance hdr(X-Key) against the vectors (twin backends, same lines)")
	same, whole, cut, cutSame := 0, 0, 0, 0
	for _, b := range bes {
		want := readVectors(filepath.Join(dir, b.name+".txt"))
		twin := backend{b.name + ".hdr", b.hashType, b.servers}
		for i, k := range keys {
			v := hdrValue(k)
			if v == "" {
				continue
			}
			got, err := place(c, twin, "/", [][2]string{{"X-Cfg", twin.name}, {"X-Key", k}})
			check(err)
			if v == k {
				whole++
				if got == want[i] {
					same++
				}
				continue
			}
			cut++
			exp, err := place(c, b, urlpPath(v), [][2]string{{"X-Cfg", b.name}})
			check(err)
			if got == exp {
				cutSame++
			}
		}
	}
	fmt.Printf("keys hdr() carries whole: %d of %d placed as in the vectors\n", same, whole)
	fmt.Printf("keys hdr() cuts or trims: %d of %d placed as the cut value is (value up to the first unquoted comma, blanks trimmed)\n", cutSame, cut)

	fmt.Println("== the empty key: which server answers 10 requests in a row")
	for _, name := range []string{"consistent-default-5", "map-default-5"} {
		b := backendNamed(bes, name)
		twin := backend{name + ".hdr", b.hashType, b.servers}
		for _, t := range []struct {
			what string
			be   backend
			path string
			hdr  [][2]string
		}{
			{"hash urlp(k): ?k=", b, "/?k=", nil},
			{"hash urlp(k): no k", b, "/", nil},
			{"hdr(X-Key): empty header", twin, "/", [][2]string{{"X-Key", ""}}},
			{"hdr(X-Key): no header", twin, "/", nil},
			{"hdr(X-Key): \" , x\"", twin, "/", [][2]string{{"X-Key", " , x"}}},
		} {
			var got []string
			for range 10 {
				idx, err := place(c, t.be, t.path, append([][2]string{{"X-Cfg", t.be.name}}, t.hdr...))
				check(err)
				got = append(got, strings.Fields(t.be.servers[idx])[0])
			}
			fmt.Printf("%s, %s: %s\n", name, t.what, strings.Join(got, " "))
		}
	}

	fmt.Println("== sections HAProxy accepts although they look wrong: answers over all keys")
	for _, a := range accepted {
		count := map[string]int{}
		for _, k := range keys {
			r, err := c.get(urlpPath(k), [][2]string{{"X-Cfg", "obs-" + a.what}})
			check(err)
			if r.status != 200 {
				count[fmt.Sprintf("status %d", r.status)]++
				continue
			}
			count[r.header("X-Server")+"@"+r.body]++
		}
		fmt.Printf("%s: %v\n", a.what, count)
	}
	want := readVectors(filepath.Join(dir, "consistent-default-3.txt"))
	b := backendNamed(bes, "consistent-default-3")
	twice := 0
	for i, k := range keys {
		idx, err := place(c, b, urlpPath(k), [][2]string{{"X-Cfg", "obs-hash-type-twice"}})
		check(err)
		if idx == want[i] {
			twice++
		}
	}
	fmt.Printf("hash-type-twice: %d of %d keys placed as consistent-default-3.txt (the last hash-type line wins)\n", twice, len(keys))
}

func backendNamed(bes []backend, name string) backend {
	for _, b := range bes {
		if b.name == name {
			return b
		}
	}
	panic("no backend " + name)
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
