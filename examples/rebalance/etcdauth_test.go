package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// pki is a CA and the certificates it signed, as PEM files in a directory.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

// newPKI writes a CA, a server certificate for 127.0.0.1 and a client certificate whose
// common name is clientCN (etcd takes it as the user name when a request carries no token).
func newPKI(t *testing.T, dir, clientCN string) pki {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "PRIVATE KEY", der)
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rebalance example test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(serial int64, cn string, usage []x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: usage, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	// etcd also dials itself with the server certificate (its gRPC gateway), hence ClientAuth.
	serverDER, serverKey := sign(2, "127.0.0.1", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []net.IP{net.ParseIP("127.0.0.1")})
	clientDER, clientKey := sign(3, clientCN, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
	return pki{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", serverDER), serverKey: writeKey("server-key.pem", serverKey),
		clientCert: write("client.pem", "CERTIFICATE", clientDER), clientKey: writeKey("client-key.pem", clientKey),
	}
}

// startTLSEtcd runs an etcd server in this process that serves https on 127.0.0.1 and
// requires a client certificate signed by p's CA; it returns its endpoint, "127.0.0.1:PORT".
func startTLSEtcd(t *testing.T, dir string, p pki) string {
	t.Helper()
	for try := 0; ; try++ {
		var ports [2]int
		for i := range ports {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ports[i] = l.Addr().(*net.TCPAddr).Port
			l.Close()
		}
		cu := url.URL{Scheme: "https", Host: "127.0.0.1:" + strconv.Itoa(ports[0])}
		pu := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[1])}
		cfg := embed.NewConfig()
		cfg.Name, cfg.Dir = "tls", filepath.Join(dir, "etcd")
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.Name + "=" + pu.String()
		cfg.ListenMetricsUrls = nil
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: p.serverCert, KeyFile: p.serverKey, TrustedCAFile: p.ca, ClientCertAuth: true}
		// bcrypt's cheapest cost (etcd's --bcrypt-cost): each process authenticates when it
		// connects, and at the default cost a -race build takes seconds per check.
		cfg.BcryptCost = 4
		cfg.Logger, cfg.LogLevel = "zap", "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			if try < 3 && strings.Contains(err.Error(), "address already in use") {
				continue // another process took the port meanwhile
			}
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("etcd with TLS not ready after 30 s")
		}
		return cu.Host
	}
}

// enableAuth creates the root user with password and turns etcd's auth on, as etcdctl's
// "user add root" and "auth enable" do (the latter grants the root role first).
func enableAuth(t *testing.T, endpoint string, p pki, password string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	pemCA, _ := os.ReadFile(p.ca)
	roots.AppendCertsFromPEM(pemCA)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.RoleAdd(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
}

// emptyDir fails the test if dir holds anything: a refused run must touch no data.
func emptyDir(t *testing.T, what, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		t.Errorf("%s: %s holds %v, want nothing touched", what, dir, entries)
	}
}

// TestProcsEtcdTLS runs a short -procs 2 scenario against an etcd that serves TLS only,
// requires a client certificate and has auth enabled, the password given the way etcdctl
// takes it (ETCDCTL_PASSWORD) and passed to the children in their environment; and checks
// that the same etcd refuses, before any data is touched, a run without the client
// certificate and one with a wrong password.
func TestProcsEtcdTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes for about 10 s")
	}
	t.Setenv("REBALANCE_EXAMPLE_MAIN", "1") // the children run main (TestMain)
	dir := t.TempDir()
	// The client certificate's name is no etcd user: only the password authenticates.
	p := newPKI(t, dir, "rebalance-example")
	endpoint := startTLSEtcd(t, dir, p)
	const password = "s3cret-Pa55"
	enableAuth(t, endpoint, p, password)

	// -mover-pace keeps the mover at work long enough for the second mover to be refused.
	flags := func(data string, more ...string) config {
		t.Helper()
		c, err := parseFlags(append([]string{"-procs", "2", "-data", data, "-users", "20", "-messages", "5", "-writers", "1", "-readers", "1",
			"-idle", "300ms", "-movers", "1", "-mover-pace", "60ms", "-etcd", endpoint}, more...), new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"no client certificate", "connect to etcd", []string{"-etcd-cacert", p.ca, "-etcd-user", "root:" + password}},
		{"wrong password", "authentication failed", []string{"-etcd-cacert", p.ca, "-etcd-cert", p.clientCert, "-etcd-key", p.clientKey, "-etcd-user", "root:wrong"}},
		{"no password", "permission denied", []string{"-etcd-cacert", p.ca, "-etcd-cert", p.clientCert, "-etcd-key", p.clientKey}},
	} {
		data := filepath.Join(dir, "refused")
		var out bytes.Buffer
		start := time.Now()
		err := parent(context.Background(), flags(data, tc.args...), &out)
		t.Logf("%s: %v (after %v)", tc.name, err, time.Since(start).Round(time.Millisecond))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal that says %q\n%s", tc.name, err, tc.want, out.String())
		}
		emptyDir(t, tc.name, data)
	}

	t.Setenv(passwordEnv, password)
	c := flags(filepath.Join(dir, "data"), "-etcd-cacert", p.ca, "-etcd-cert", p.clientCert, "-etcd-key", p.clientKey, "-etcd-user", "root")
	for _, role := range []string{"app", "mover"} {
		if args := c.roleArgs(role, 0, []string{endpoint}, "/p/", dir); slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, password) }) {
			t.Errorf("the %s's command line holds the password: %q", role, args)
		}
	}
	os.Unsetenv(passwordEnv) // the children must get it from the parent, not from this test
	if !slices.Contains(c.childEnv(), passwordEnv+"="+password) {
		t.Errorf("the children's environment has no %s", passwordEnv)
	}
	var out bytes.Buffer
	if err := parent(context.Background(), c, &out); err != nil {
		t.Fatalf("parent: %v\n%s", err, out.String())
	}
	for _, want := range []string{`(?m)^etcd: ` + regexp.QuoteMeta(endpoint) + ` \(-etcd\)$`,
		`verify: 0 lost, 0 duplicated, 0 misplaced, 0 lost updates, 0 resurrected deletes; 0 orphans; \d+ rows moved at \d+ rows/s;.* OK`,
		`second mover: refused, exit status 1: rebalance example: coord: a mover already runs`,
		`(?m)^\[mover\] all steps done$`,
		`foreground \(all 2 incarnations of the 2 application processes; `} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matches %q in:\n%s", want, out.String())
		}
	} // No kill: every acknowledged write (insert, update, delete) is in the figures.
	acked := regexp.MustCompile(`acknowledged (\d+) inserts, (\d+) updates, (\d+) deletes`).FindStringSubmatch(out.String())
	counted := regexp.MustCompile(`at most\): (\d+) writes \((\d+) updates, (\d+) deletes\)`).FindStringSubmatch(out.String())
	if acked == nil || counted == nil || atoi(acked[1])+atoi(acked[2])+atoi(acked[3]) != atoi(counted[1]) ||
		acked[2] != counted[2] || acked[3] != counted[3] {
		t.Errorf("acknowledged inserts, updates, deletes %v, writes, updates, deletes in the figures %v: want equal\n%s", acked, counted, out.String())
	}
}

// TestEtcdFlagsRefused checks that bad etcd flags are refused by parseFlags with a message
// naming the flag, and that the command exits with status 2 touching nothing.
func TestEtcdFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir, "c")
	notPEM := filepath.Join(dir, "not-a-cert.pem")
	os.WriteFile(notPEM, []byte("-----BEGIN NOTHING-----\n"), 0o600)
	missing := filepath.Join(dir, "missing.pem")
	base := []string{"-procs", "2", "-etcd", "127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		args []string
		env  string // ETCDCTL_PASSWORD
		want string
	}{
		{"TLS without -etcd", []string{"-procs", "2", "-etcd-cacert", p.ca}, "", "need -etcd"},
		{"user without -etcd", []string{"-procs", "2", "-etcd-user", "root:x"}, "", "need -etcd"},
		{"missing CA file", append(base, "-etcd-cacert", missing), "", "-etcd-cacert: open " + missing},
		{"CA file with no certificate", append(base, "-etcd-cacert", notPEM), "", "holds no PEM certificate"},
		{"CA file that is a key", append(base, "-etcd-cacert", p.clientKey), "", "holds no PEM certificate"},
		{"certificate without key", append(base, "-etcd-cert", p.clientCert), "", "a client certificate needs its key"},
		{"key without certificate", append(base, "-etcd-key", p.clientKey), "", "a client certificate needs its key"},
		{"missing key file", append(base, "-etcd-cert", p.clientCert, "-etcd-key", missing), "", "-etcd-key: stat " + missing},
		{"key of another certificate", append(base, "-etcd-cert", p.clientCert, "-etcd-key", p.serverKey), "", "private key does not match public key"},
		{"http endpoint with TLS", []string{"-procs", "2", "-etcd", "http://127.0.0.1:1", "-etcd-cacert", p.ca}, "", "is plain http"},
		{"user without password", append(base, "-etcd-user", "root"), "", "has no password"},
		{"password twice", append(base, "-etcd-user", "root:x"), "y", "give the password once"},
		{"empty user name", append(base, "-etcd-user", ":x"), "", "no user name"},
	} {
		t.Setenv(passwordEnv, tc.env)
		_, err := parseFlags(tc.args, new(bytes.Buffer))
		if !errors.Is(err, errEtcdFlags) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error wrapping %v that says %q", tc.name, err, errEtcdFlags, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), ":x") {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
	}
	t.Setenv(passwordEnv, "")
	for _, tc := range []struct {
		args []string
		user string
		pass string
	}{
		{append(base, "-etcd-user", "root:pa:ss"), "root", "pa:ss"},
		{append(base, "-etcd-cacert", p.ca, "-etcd-cert", p.clientCert, "-etcd-key", p.clientKey), "", ""},
	} {
		c, err := parseFlags(tc.args, new(bytes.Buffer))
		if err != nil || c.access.user != tc.user || c.access.password != tc.pass {
			t.Errorf("%q: user %q password %q, %v; want %q, %q", tc.args, c.access.user, c.access.password, err, tc.user, tc.pass)
		}
	}

	// The command itself: exit status 2, the message on stderr, no data directory made.
	data := filepath.Join(dir, "data")
	cmd := exec.Command(os.Args[0], "-procs", "2", "-data", data, "-etcd", "127.0.0.1:1", "-etcd-cert", p.clientCert)
	cmd.Env = append(os.Environ(), "REBALANCE_EXAMPLE_MAIN=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "rebalance example: -etcd-cert") {
		t.Errorf("a certificate without its key: %v, output %q; want exit status 2 and the reason", err, out)
	}
	emptyDir(t, "a certificate without its key", data)
}
