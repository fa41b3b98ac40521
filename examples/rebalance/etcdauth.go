package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/shardkit/shard/coord"
)

// The -etcd-cacert, -etcd-cert, -etcd-key and -etcd-user flags reach a cluster that serves
// TLS, checks client certificates or has auth enabled. They mean what etcdctl's --cacert,
// --cert, --key and --user mean (etcdctl/README.md, "Global flags"): a CA bundle that
// verifies the servers, a client certificate and its key, and "name:password" or a name
// alone with the password in ETCDCTL_PASSWORD (etcdctl maps each flag to an ETCDCTL_
// variable; etcdctl would prompt for a missing password, this program cannot).

// passwordEnv is the variable that holds the password when -etcd-user has no colon; the
// -procs parent passes it to its children this way, never on their command lines, where
// every user of the machine could read it (/proc/PID/cmdline).
const passwordEnv = "ETCDCTL_PASSWORD"

// etcdAccess is what the etcd flags resolve to: the TLS configuration, if any, and the
// credentials. Built once by parseFlags, before anything is opened.
type etcdAccess struct {
	tls            *tls.Config
	user, password string
}

// options returns coord's Options for these settings.
func (a etcdAccess) options(o coord.Options) coord.Options {
	o.TLS, o.Username, o.Password = a.tls, a.user, a.password
	return o
}

// errEtcdFlags marks a refusal of the etcd flags.
var errEtcdFlags = errors.New("bad etcd flags")

// loadEtcdAccess checks the etcd flags and reads the files they name. getenv reads the
// environment (os.Getenv; a test passes its own).
func loadEtcdAccess(c config, getenv func(string) string) (etcdAccess, error) {
	var a etcdAccess
	refuse := func(format string, args ...any) (etcdAccess, error) {
		return etcdAccess{}, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errEtcdFlags)
	}
	withTLS := c.etcdCACert != "" || c.etcdCert != "" || c.etcdKey != ""
	if (withTLS || c.etcdUser != "") && c.etcd == "" {
		return refuse("-etcd-cacert, -etcd-cert, -etcd-key and -etcd-user need -etcd: the etcd embedded in this process serves plain http without auth")
	}
	if withTLS {
		// etcd's client drops the TLS settings for an http:// endpoint without a word
		// (client/v3/internal/endpoint: the scheme "http" means CredsDrop).
		for _, e := range c.endpoints() {
			if strings.HasPrefix(e, "http://") {
				return refuse("-etcd %s is plain http, but the TLS flags are given: write https://%s or host:port", e, strings.TrimPrefix(e, "http://"))
			}
		}
		if (c.etcdCert == "") != (c.etcdKey == "") {
			return refuse("-etcd-cert %q -etcd-key %q: a client certificate needs its key, and a key its certificate", c.etcdCert, c.etcdKey)
		}
		a.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		if c.etcdCACert != "" {
			pem, err := os.ReadFile(c.etcdCACert)
			if err != nil {
				return refuse("-etcd-cacert: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return refuse("-etcd-cacert %s holds no PEM certificate", c.etcdCACert)
			}
			a.tls.RootCAs = pool
		}
		if c.etcdCert != "" {
			for _, f := range []struct{ flag, name string }{{"-etcd-cert", c.etcdCert}, {"-etcd-key", c.etcdKey}} {
				if _, err := os.Stat(f.name); err != nil {
					return refuse("%s: %v", f.flag, err)
				}
			}
			pair, err := tls.LoadX509KeyPair(c.etcdCert, c.etcdKey)
			if err != nil {
				return refuse("-etcd-cert %s -etcd-key %s: %v", c.etcdCert, c.etcdKey, err)
			}
			a.tls.Certificates = []tls.Certificate{pair}
		}
	}
	if c.etcdUser != "" {
		env := getenv(passwordEnv)
		name, password, hasColon := strings.Cut(c.etcdUser, ":")
		switch {
		case name == "":
			return refuse("-etcd-user %q: no user name before the colon", redact(c.etcdUser))
		case hasColon && env != "":
			return refuse("-etcd-user holds a password and %s is set too: give the password once", passwordEnv)
		case !hasColon && env == "":
			return refuse("-etcd-user %s has no password: write -etcd-user %s:PASSWORD or set %s", name, name, passwordEnv)
		case !hasColon:
			password = env
		}
		a.user, a.password = name, password
	}
	return a, nil
}

// redact hides the password of a "name:password" value in messages.
func redact(user string) string {
	if name, _, ok := strings.Cut(user, ":"); ok {
		return name + ":***"
	}
	return user
}

// etcdArgs are the etcd flags of a child process: the files as given, the user name alone
// (its password goes in the child's environment, childEnv).
func (c config) etcdArgs() []string {
	var args []string
	for _, f := range []struct{ flag, value string }{{"-etcd-cacert", c.etcdCACert}, {"-etcd-cert", c.etcdCert}, {"-etcd-key", c.etcdKey}, {"-etcd-user", c.access.user}} {
		if f.value != "" {
			args = append(args, f.flag, f.value)
		}
	}
	return args
}

// childEnv is the environment of a child process: this one's, with the etcd password, if
// any, in ETCDCTL_PASSWORD (the last value of a variable wins, os/exec says).
func (c config) childEnv() []string {
	env := os.Environ()
	if c.access.user != "" {
		env = append(env, passwordEnv+"="+c.access.password)
	}
	return env
}
