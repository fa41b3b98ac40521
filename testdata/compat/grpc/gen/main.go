// Command gen writes the gRPC ring_hash compatibility vectors: it starts 20 real gRPC servers
// on 127.0.0.1, each of which answers any RPC with a header naming itself, and for every
// configuration builds a real grpc-go client (grpc.NewClient) whose default service config is
// the configuration file itself and whose endpoints (with their weights and hash keys as
// resolver attributes) come from a manual resolver. Every key of keys.txt that gRPC can carry
// in a header is sent once in the configuration's requestHashHeader, and the server that
// answered is recorded.
//
//	go run . -keys ../../keys.txt -out ..
//
// A configuration that sets ringHashCap runs in a child process of gen with the
// GRPC_RING_HASH_CAP environment variable set to it, which grpc-go reads once at start.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/resolver/ringhash"
	"google.golang.org/protobuf/types/known/emptypb"

	_ "google.golang.org/grpc/balancer/ringhash" // registers ring_hash_experimental
)

// endpoint is one endpoint of a configuration: the gen gives endpoint i the address of
// live server i (or of server n-1-i in the second run of a configuration with hash keys).
type endpoint struct {
	weight  int64 // 0: no weight attribute; -1: "weight": 0 written
	hashKey string
}

// config is one configuration: the file name, the loadBalancingConfig (or other service
// config members) written verbatim, the endpoints, and GRPC_RING_HASH_CAP (0: unset).
type config struct {
	file string
	lb   string
	eps  []endpoint
	cap  uint64
	why  string // for the README's table
}

func ring(min, max int, header string) string {
	var parts []string
	if min > 0 {
		parts = append(parts, fmt.Sprintf(`"minRingSize": %d`, min))
	}
	if max > 0 {
		parts = append(parts, fmt.Sprintf(`"maxRingSize": %d`, max))
	}
	if header != "" {
		parts = append(parts, fmt.Sprintf(`"requestHashHeader": %q`, header))
	}
	return `"loadBalancingConfig": [{"ring_hash_experimental": {` + strings.Join(parts, ", ") + `}}]`
}

func plain(n int) []endpoint { return make([]endpoint, n) }

func weighted(ws ...int64) []endpoint {
	eps := make([]endpoint, len(ws))
	for i, w := range ws {
		eps[i].weight = w
	}
	return eps
}

func keyed(keys ...string) []endpoint {
	eps := make([]endpoint, len(keys))
	for i, k := range keys {
		eps[i].hashKey = k
	}
	return eps
}

const header = "x-shard-key"

var configs = []config{
	{file: "default-1", lb: ring(0, 0, header), eps: plain(1)},
	{file: "default-2", lb: ring(0, 0, header), eps: plain(2)},
	{file: "default-3", lb: ring(0, 0, header), eps: plain(3)},
	{file: "default-5", lb: ring(0, 0, header), eps: plain(5)},
	{file: "default-10", lb: ring(0, 0, header), eps: plain(10)},
	{file: "default-20", lb: ring(0, 0, header), eps: plain(20)},
	{file: "weights-1-2-3-4", lb: ring(0, 0, header), eps: weighted(1, 2, 3, 4)},
	{file: "weights-1-100", lb: ring(0, 0, header), eps: weighted(1, 100)},
	{file: "weights-1-1000-3", lb: ring(0, 0, header), eps: weighted(1, 1000, 3)},
	{file: "weights-1-10000-50", lb: ring(0, 0, header), eps: weighted(1, 10000, 50)},
	{file: "weights-0-1-2", lb: ring(0, 0, header), eps: weighted(-1, 1, 2)},
	{file: "weights-uint32-max", lb: ring(0, 0, header), eps: weighted(4000000000, 294967294, 1)},
	{file: "weights-sum-wraps", lb: ring(0, 0, header), eps: weighted(3000000000, 3000000000, 1)},
	{file: "ring-1-1-3", lb: ring(1, 1, header), eps: plain(3)},
	{file: "ring-64-64-weights", lb: ring(64, 64, header), eps: weighted(1, 2, 3, 5, 7)},
	{file: "ring-10-100-7", lb: ring(10, 100, header), eps: plain(7)},
	{file: "ring-min-only-2000", lb: ring(2000, 0, header), eps: weighted(1, 3)},
	{file: "ring-5000-8000-capped", lb: ring(5000, 8000, header), eps: weighted(2, 3, 5)},
	{file: "cap-100000-ring-20000-100000", lb: ring(20000, 100000, header), eps: weighted(1, 2, 3, 4, 5, 6), cap: 100000},
	{file: "cap-100-ring-default", lb: ring(0, 0, header), eps: plain(4), cap: 100},
	{file: "hashkeys-5", lb: ring(0, 0, header), eps: keyed("backend-a", "backend-b", "backend-c", "backend-d", "backend-e")},
	{file: "hashkeys-3-weights", lb: ring(0, 0, header), eps: []endpoint{{weight: 5, hashKey: "zone-1/shard-1"}, {weight: 1, hashKey: "zone-1/shard-2"}, {weight: 2, hashKey: "zone-2/shard-1"}}},
	{file: "header-mixed-case", lb: ring(0, 0, "X-Shard-Key"), eps: plain(3)},
	{file: "policy-list-fallback", lb: `"loadBalancingConfig": [{"ring_hash_experimental": {"requestHashHeader": "x-shard-key", "minRingSize": 100}}, {"round_robin": {}}]`, eps: plain(3)},
}

// refusals are configurations grpc-go refuses, or with which it fails every RPC.
var refusals = []config{
	{file: "refused-no-header", lb: ring(0, 0, ""), eps: plain(3)},
	{file: "refused-policy-name-only", lb: `"loadBalancingPolicy": "ring_hash_experimental"`, eps: plain(3)},
	{file: "refused-min-over-max", lb: ring(2000, 1000, header), eps: plain(3)},
	{file: "refused-max-over-8m", lb: ring(0, 8388609, header), eps: plain(3)},
	{file: "refused-header-bin", lb: ring(0, 0, "x-shard-key-bin"), eps: plain(3)},
	{file: "refused-header-space", lb: ring(0, 0, "x shard key"), eps: plain(3)},
	{file: "refused-no-endpoints", lb: ring(0, 0, header), eps: nil},
}

func main() {
	keysPath := flag.String("keys", "../../keys.txt", "the shared key set")
	outDir := flag.String("out", "..", "where the configs and vectors go")
	child := flag.String("child", "", "internal: run this one configuration against -addrs")
	addrList := flag.String("addrs", "", "internal: the live servers, for -child")
	flag.Parse()

	keys, err := readKeys(*keysPath)
	if err != nil {
		log.Fatal(err)
	}
	if *child != "" {
		runChild(*child, strings.Split(*addrList, ","), keys, *outDir)
		return
	}

	live, stop := startServers(20)
	defer stop()
	system := "grpc-go " + grpcVersion() + " ring_hash_experimental, " + goVersion()

	for _, c := range configs {
		path := filepath.Join(*outDir, c.file+".json")
		if err := os.WriteFile(path, configJSON(c, live, false), 0o644); err != nil {
			log.Fatal(err)
		}
		var where []int
		if c.cap != 0 {
			where = fromChild(c, live, *keysPath, *outDir)
		} else {
			where, err = place(c, live, false, keys)
			if err != nil {
				log.Fatalf("gen: %s: %v", c.file, err)
			}
		}
		if c.eps[0].hashKey != "" {
			// The same hash keys on the servers in the opposite order: the placement
			// follows the hash keys, not the addresses.
			again, err := place(c, live, true, keys)
			if err != nil {
				log.Fatalf("gen: %s (addresses reversed): %v", c.file, err)
			}
			if !slices.Equal(where, again) {
				log.Fatalf("gen: %s: keys moved when only the addresses changed", c.file)
			}
		}
		if err := writeVectors(filepath.Join(*outDir, c.file+".txt"), system, c, live, keys, where); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d keys carried, per endpoint %v\n", c.file, carried(where), counts(where, len(c.eps)))
	}
	for _, c := range refusals {
		path := filepath.Join(*outDir, c.file+".json")
		if err := os.WriteFile(path, configJSON(c, live, false), 0o644); err != nil {
			log.Fatal(err)
		}
		_, err := place(c, live, false, keys)
		if err == nil {
			log.Fatalf("gen: %s: grpc-go placed every key", c.file)
		}
		fmt.Printf("%s: %v\n", c.file, err)
	}
}

// configJSON is the configuration file: the service config members and the endpoints, with
// live server i as endpoint i (n-1-i when reversed).
func configJSON(c config, live []string, reversed bool) []byte {
	var b strings.Builder
	b.WriteString("{\n  " + c.lb + ",\n")
	if c.cap != 0 {
		fmt.Fprintf(&b, "  \"ringHashCap\": %d,\n", c.cap)
	}
	b.WriteString("  \"endpoints\": [")
	for i, e := range c.eps {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n    {\"address\": " + strconv.Quote(addrOf(live, len(c.eps), i, reversed)))
		switch {
		case e.weight < 0:
			b.WriteString(", \"weight\": 0")
		case e.weight > 0:
			fmt.Fprintf(&b, ", \"weight\": %d", e.weight)
		}
		if e.hashKey != "" {
			b.WriteString(", \"hashKey\": " + strconv.Quote(e.hashKey))
		}
		b.WriteString("}")
	}
	if len(c.eps) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]\n}\n")
	return []byte(b.String())
}

func addrOf(live []string, n, i int, reversed bool) string {
	if reversed {
		return live[n-1-i]
	}
	return live[i]
}

// requestHeader returns the configuration's requestHashHeader as the client sends it.
func requestHeader(c config) string {
	var sc struct {
		LoadBalancingConfig []map[string]struct{ RequestHashHeader string }
	}
	_ = json.Unmarshal([]byte("{"+c.lb+"}"), &sc)
	for _, m := range sc.LoadBalancingConfig {
		if v, ok := m["ring_hash_experimental"]; ok && v.RequestHashHeader != "" {
			return v.RequestHashHeader
		}
	}
	return header
}

// place runs one configuration in this process: a client with the file as its default
// service config and the endpoints from a manual resolver; every key that gRPC can carry is
// sent in the request hash header, and where[i] is the endpoint that answered key i (-1 for
// a key gRPC refuses to send, after checking that it does refuse it).
func place(c config, live []string, reversed bool, keys []string) ([]int, error) {
	file := configJSON(c, live, reversed)
	r := manual.NewBuilderWithScheme("gen")
	var eps []resolver.Endpoint
	index := map[string]int{}
	for i, e := range c.eps {
		a := addrOf(live, len(c.eps), i, reversed)
		index[a] = i
		ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
		if e.weight != 0 {
			ep = weight.Set(ep, weight.EndpointInfo{Weight: uint32(max(e.weight, 0))})
		}
		ep = ringhash.SetHashKey(ep, e.hashKey)
		eps = append(eps, ep)
	}
	r.InitialState(resolver.State{Endpoints: eps})
	cc, err := grpc.NewClient("gen:///backends", grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(string(file)))
	if err != nil {
		return nil, fmt.Errorf("grpc.NewClient: %w", err)
	}
	defer cc.Close()
	h := requestHeader(c)
	where := make([]int, len(keys))
	for i, k := range keys {
		got, err := call(cc, h, k)
		if !printable(k) {
			if err == nil || !strings.Contains(err.Error(), "non-printable ASCII") {
				return nil, fmt.Errorf("key %d (%q): grpc-go sent it (%q, %v)", i, k, got, err)
			}
			where[i] = -1
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("key %d (%q): %w", i, k, err)
		}
		e, ok := index[got]
		if !ok {
			return nil, fmt.Errorf("key %d: answered by %q, not an endpoint", i, got)
		}
		where[i] = e
		// A key with commas sent as several values of the header: grpc-go joins them
		// with "," before hashing, so the same endpoint answers.
		if strings.Contains(k, ",") {
			again, err := call(cc, h, strings.Split(k, ",")...)
			if err != nil || again != got {
				return nil, fmt.Errorf("key %d (%q) sent as several values: %q, %v, want %q", i, k, again, err, got)
			}
		}
	}
	return where, nil
}

// call sends one RPC with the header set to values and returns the server that answered.
func call(cc *grpc.ClientConn, h string, values ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range values {
		ctx = metadata.AppendToOutgoingContext(ctx, h, v)
	}
	var md metadata.MD
	err := cc.Invoke(ctx, "/gen.Who/Served", &emptypb.Empty{}, &emptypb.Empty{}, grpc.Header(&md))
	if err != nil {
		return "", err
	}
	if v := md.Get("x-served-by"); len(v) == 1 {
		return v[0], nil
	}
	return "", errors.New("no x-served-by header")
}

// printable reports whether grpc-go sends v as a header value: bytes in 0x20..0x7E
// (internal/metadata ValidatePair).
func printable(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// fromChild runs c in a child process with GRPC_RING_HASH_CAP set.
func fromChild(c config, live []string, keysPath, outDir string) []int {
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	tmp := filepath.Join(os.TempDir(), fmt.Sprintf("grpc-gen-%d-%s.json", os.Getpid(), c.file))
	defer os.Remove(tmp)
	cmd := exec.Command(exe, "-keys", keysPath, "-out", tmp, "-child", c.file, "-addrs", strings.Join(live, ","))
	cmd.Env = append(os.Environ(), "GRPC_RING_HASH_CAP="+strconv.FormatUint(c.cap, 10))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("gen: %s in a child: %v", c.file, err)
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		log.Fatal(err)
	}
	var where []int
	if err := json.Unmarshal(b, &where); err != nil {
		log.Fatal(err)
	}
	return where
}

func runChild(name string, live []string, keys []string, out string) {
	for _, c := range configs {
		if c.file == name {
			where, err := place(c, live, false, keys)
			if err != nil {
				log.Fatalf("gen: %s: %v", c.file, err)
			}
			b, _ := json.Marshal(where)
			if err := os.WriteFile(out, b, 0o644); err != nil {
				log.Fatal(err)
			}
			return
		}
	}
	log.Fatalf("gen: no configuration %q", name)
}

// startServers starts n gRPC servers on 127.0.0.1 (ports the kernel picks); each answers
// any method with an empty message and the header x-served-by: its address.
func startServers(n int) ([]string, func()) {
	var addrs []string
	var servers []*grpc.Server
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		self := lis.Addr().String()
		s := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
				return err
			}
			if err := stream.SendHeader(metadata.Pairs("x-served-by", self)); err != nil {
				return err
			}
			return stream.SendMsg(&emptypb.Empty{})
		}))
		go s.Serve(lis)
		servers = append(servers, s)
		addrs = append(addrs, self)
	}
	return addrs, func() {
		for _, s := range servers {
			s.Stop()
		}
	}
}

func writeVectors(path, system string, c config, live []string, keys []string, where []int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# system: %s, %s.json", system, c.file)
	if c.cap != 0 {
		fmt.Fprintf(&b, " with GRPC_RING_HASH_CAP=%d", c.cap)
	}
	b.WriteString("\n# front door: one RPC per key through grpc.NewClient (manual resolver, the file as default service config) to live servers on 127.0.0.1, the key in the request hash header; the server that answered\n")
	b.WriteString("# servers:")
	for i := range c.eps {
		fmt.Fprintf(&b, " %d=%s", i, live[i])
	}
	var skipped int
	for _, w := range where {
		if w < 0 {
			skipped++
		}
	}
	fmt.Fprintf(&b, "\n# skipped: %d keys with bytes outside 0x20..0x7E, which grpc-go refuses to send in a header (\"header key ... contains value with non-printable ASCII characters\")\n", skipped)
	for i, w := range where {
		if w >= 0 {
			fmt.Fprintf(&b, "%d %d\n", i, w)
		}
	}
	_ = keys
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func carried(where []int) int {
	n := 0
	for _, w := range where {
		if w >= 0 {
			n++
		}
	}
	return n
}

func counts(where []int, n int) []int {
	c := make([]int, n)
	for _, w := range where {
		if w >= 0 {
			c[w]++
		}
	}
	return c
}

func readKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "-":
			keys = append(keys, "")
		default:
			k, err := hex.DecodeString(line)
			if err != nil {
				return nil, err
			}
			keys = append(keys, string(k))
		}
	}
	return keys, nil
}

func grpcVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "google.golang.org/grpc" {
				return d.Version
			}
		}
	}
	return "?"
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "?"
}
