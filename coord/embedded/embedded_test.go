package embedded_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardkit/shard/coord/embedded"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestStart(t *testing.T) {
	dir := t.TempDir()
	eps, stop, err := embedded.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(eps[0])
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "2379" {
		t.Errorf("endpoint %q: want 127.0.0.1 on a free port", eps[0])
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	stop()

	// The data survives a restart in the same directory.
	eps, stop, err = embedded.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c2, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r, err := c2.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: %v, %v; want k=v", r, err)
	}
}

func TestStartProcessMissingBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-etcd")
	_, _, err := embedded.StartProcess(missing, t.TempDir())
	if !errors.Is(err, embedded.ErrStart) {
		t.Fatalf("StartProcess(%s): %v, want ErrStart", missing, err)
	}
}

func TestStartAtRestarts(t *testing.T) {
	dir := t.TempDir()
	eps, stop, err := embedded.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	u, _ := url.Parse(eps[0])
	eps2, stop, err := embedded.StartAt(dir, u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if eps2[0] != eps[0] {
		t.Errorf("restarted on %s, want %s", eps2[0], eps[0])
	}
	if _, _, err := embedded.StartAt(dir, "0.0.0.0:1"); !errors.Is(err, embedded.ErrStart) {
		t.Errorf("StartAt on 0.0.0.0: %v, want ErrStart", err)
	}
}
