package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// client speaks HTTP/1.1 over one kept-alive connection, writing requests byte for byte:
// net/http's client trims header values and would change the keys.
type client struct {
	conn net.Conn
	r    *bufio.Reader
}

type response struct {
	status int
	body   string
	hdr    http.Header
}

func (r response) header(name string) string { return r.hdr.Get(name) }

func dial() *client {
	c := &client{}
	check(c.redial())
	return c
}

func (c *client) redial() error {
	if c.conn != nil {
		c.conn.Close()
	}
	conn, err := net.Dial("tcp", front)
	if err != nil {
		return err
	}
	c.conn, c.r = conn, bufio.NewReader(conn)
	return nil
}

func (c *client) close() { c.conn.Close() }

// get sends GET path with the given headers, exactly as given, and reads the answer. A
// connection the server closed is reopened once.
func (c *client) get(path string, headers [][2]string) (response, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: front\r\n", path)
	for _, h := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("\r\n")
	r, err := c.roundTrip(b.String())
	if err != nil {
		if err = c.redial(); err != nil {
			return response{}, err
		}
		r, err = c.roundTrip(b.String())
	}
	return r, err
}

func (c *client) roundTrip(req string) (response, error) {
	if _, err := io.WriteString(c.conn, req); err != nil {
		return response{}, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return response{}, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return response{}, err
	}
	if resp.Close {
		err = c.redial()
	}
	return response{resp.StatusCode, string(body), resp.Header}, err
}

func hexDecode(s string) (string, error) {
	b, err := hex.DecodeString(s)
	return string(b), err
}
