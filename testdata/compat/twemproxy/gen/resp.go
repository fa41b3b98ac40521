package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is just enough of a RESP2 client to SET, GET, SCAN and FLUSHALL binary-safe keys.
type conn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// dial connects to "127.0.0.1:port" or, when addr starts with '/', to a unix socket.
func dial(addr string) (*conn, error) {
	network := "tcp"
	if addr[0] == '/' {
		network = "unix"
	}
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, r: bufio.NewReaderSize(c, 1<<16), w: bufio.NewWriterSize(c, 1<<16)}, nil
}

func (c *conn) Close() error { return c.c.Close() }

// send queues one command; flush sends everything queued (pipelining).
func (c *conn) send(args ...[]byte) {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n", len(a))
		c.w.Write(a)
		c.w.WriteString("\r\n")
	}
}

func (c *conn) flush() error {
	c.c.SetDeadline(time.Now().Add(60 * time.Second))
	return c.w.Flush()
}

// reply is one decoded RESP value: status and error replies as strings (err set for
// errors), bulk strings as bytes (nil for the null bulk), arrays as []reply.
type reply struct {
	status string
	err    string
	num    int64
	bulk   []byte
	array  []reply
}

func (c *conn) read() (reply, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, fmt.Errorf("bad reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return reply{status: body}, nil
	case '-':
		return reply{err: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		return reply{num: n}, err
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return reply{}, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return reply{}, err
		}
		return reply{bulk: b[:n]}, nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, err
		}
		rs := make([]reply, 0, max(n, 0))
		for range n {
			r, err := c.read()
			if err != nil {
				return reply{}, err
			}
			rs = append(rs, r)
		}
		return reply{array: rs}, nil
	}
	return reply{}, fmt.Errorf("unknown reply type %q", line)
}

// do sends one command and reads its reply.
func (c *conn) do(args ...string) (reply, error) {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	c.send(bs...)
	if err := c.flush(); err != nil {
		return reply{}, err
	}
	return c.read()
}

// scanAll returns every key of database 0 of one backend, by SCAN.
func scanAll(addr string) ([][]byte, error) {
	c, err := dial(addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var keys [][]byte
	cursor := "0"
	for {
		r, err := c.do("SCAN", cursor, "COUNT", "1000")
		if err != nil {
			return nil, err
		}
		if r.err != "" || len(r.array) != 2 {
			return nil, fmt.Errorf("SCAN on %s: unexpected reply %+v", addr, r)
		}
		for _, k := range r.array[1].array {
			keys = append(keys, k.bulk)
		}
		cursor = string(r.array[0].bulk)
		if cursor == "0" {
			return keys, nil
		}
	}
}
