package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ackLog is the ledger of one application process in -procs mode: an append-only file of its
// own, where a writer puts an intent line before it writes and an ack line once the write has
// committed and been acknowledged. Each line is one write(2) with no user-space buffer: a
// SIGKILL cannot lose a line the process wrote (the page cache outlives the process), only a
// power cut could, as it could lose the databases' unsynced commits too.
//
// The ledger says which writes were acknowledged, of the chat tables:
//
//   - messages (m) and reactions (r): inserts (I), updates (U) and deletes (D), each an
//     intent line and then, once it committed, an ack line (A) naming the row. Only the
//     writer goroutine that inserted a row updates or deletes it, one write at a time, and
//     never again after a write of it went unacknowledged: an ack always answers the row's
//     latest intent, and each row's lines in order give its final content. A writer reacts
//     only to its own messages, so the deletion of a message, which cascades to its
//     reactions, deletes only rows of its own.
//   - users' balances: any writer adds an amount to any user's balance (B, then A b with the
//     user and the amount). Additions commute: the final balance is the loaded one plus
//     every acknowledged amount, plus some of those in flight.
//
// A write with an intent and no ack is the known "unrecorded" case: a kill (or an error) came
// between its commit and its ack, so the row may show it or not and either is correct; the
// verifier counts those that show it.
type ackLog struct {
	mu sync.Mutex
	f  *os.File
}

// ackName is the file of one incarnation of application process proc: a restarted process
// opens a new one, so no two processes ever append to one file.
func ackName(dir string, proc, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("app%d-pid%d.log", proc, pid))
}

func createAckLog(dir string, proc int) (*ackLog, error) {
	f, err := os.OpenFile(ackName(dir, proc, os.Getpid()), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &ackLog{f: f}, nil
}

func (l *ackLog) line(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(s); err != nil {
		return fmt.Errorf("ledger %s: %w", l.f.Name(), err)
	}
	return nil
}

// intend records that message m is about to be inserted.
func (l *ackLog) intend(m message) error {
	return l.line(fmt.Sprintf("I m %d %d %d\n", m.ID, m.UserID, checksum(m)))
}

// intendReaction records that reaction r is about to be inserted.
func (l *ackLog) intendReaction(r reaction) error {
	return l.line(fmt.Sprintf("I r %d %d %d %d\n", r.ID, r.UserID, reactionSum(r), r.MessageID))
}

// intendUpdate records that message m, inserted by this writer, is about to be updated to m.
func (l *ackLog) intendUpdate(m message) error {
	return l.line(fmt.Sprintf("U m %d %d\n", m.ID, checksum(m)))
}

// intendReactionUpdate records that reaction r, inserted by this writer, is about to be
// updated to r.
func (l *ackLog) intendReactionUpdate(r reaction) error {
	return l.line(fmt.Sprintf("U r %d %d\n", r.ID, reactionSum(r)))
}

// intendDelete records that row id of table t ('m' or 'r'), inserted by this writer, is
// about to be deleted.
func (l *ackLog) intendDelete(t byte, id int64) error { return l.line(fmt.Sprintf("D %c %d\n", t, id)) }

// ack records that the latest intent of row id of table t committed and was acknowledged.
func (l *ackLog) ack(t byte, id int64) error { return l.line(fmt.Sprintf("A %c %d\n", t, id)) }

// intendCredit records that amount is about to be added to user's balance.
func (l *ackLog) intendCredit(user, amount int64) error {
	return l.line(fmt.Sprintf("B %d %d\n", user, amount))
}

// ackCredit records that an addition of amount to user's balance committed and was
// acknowledged.
func (l *ackLog) ackCredit(user, amount int64) error {
	return l.line(fmt.Sprintf("A b %d %d\n", user, amount))
}

func (l *ackLog) close() error { return l.f.Close() }

// rowKey names a row of messages ('m') or reactions ('r').
type rowKey struct {
	t  byte
	id int64
}

// written is the history of one message or reaction in the ledgers: its user (and a
// reaction's message), its last acknowledged state, the write in flight when its writer
// stopped (an intent without an ack), and what the verifier found of it.
type written struct {
	user     int64
	message  int64  // of a reaction: the message it reacts to
	acked    bool   // its insert was acknowledged
	present  bool   // it exists after its last acknowledged write
	sum      uint64 // its content then, when present
	updates  int32  // acknowledged updates
	deleted  bool   // its delete was acknowledged
	pending  byte   // the write in flight at the end: 0 (none), 'I', 'U' or 'D'
	pendSum  uint64 // the content an I or U in flight writes
	seen     int32  // rows the verifier found with this ID
	mismatch int32  // of them, rows with content neither acknowledged nor in flight
	inFlight int32  // of them, rows that show the write in flight (I or U)
}

// credits are the additions to one user's balance in the ledgers: the sum of the
// acknowledged ones, and the amounts in flight when their writers stopped.
type credits struct {
	acked   int64
	n       int64 // acknowledged additions
	pending []int64
}

// ledgers are every application process's ledger lines, merged.
type ledgers struct {
	rows     map[rowKey]*written
	balances map[int64]*credits
}

// readAckLogs reads every ledger file in dir. A last line without its newline (a kill in the
// middle of a write(2), which Linux does not do to a regular file, but a torn tail is cheap
// to tolerate) is ignored: it acknowledged nothing.
func readAckLogs(dir string) (*ledgers, error) {
	out := &ledgers{rows: map[rowKey]*written{}, balances: map[int64]*credits{}}
	files, err := filepath.Glob(filepath.Join(dir, "app*-pid*.log"))
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		if err := readAckLog(name, out); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", name, err)
		}
	}
	return out, nil
}

func readAckLog(name string, out *ledgers) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	// The credits in flight of this file: an ack answers an intent of its own incarnation.
	inFlight := map[[2]int64]int{}
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) { // the end, or a torn last line
			break
		}
		if err != nil {
			return err
		}
		fields := strings.Fields(line)
		bad := fmt.Errorf("line %d %q: %w", n, strings.TrimSpace(line), errState)
		// The numbers of the line, but for a content checksum (an unsigned 64-bit value).
		nums := make([]int64, len(fields))
		for i := 2; i < len(fields); i++ {
			if fields[0] == "I" && i == 4 || fields[0] == "U" && i == 3 {
				continue
			}
			if nums[i], err = strconv.ParseInt(fields[i], 10, 64); err != nil {
				return bad
			}
		}
		if len(fields) == 3 && fields[0] == "B" || len(fields) == 4 && fields[0] == "A" && fields[1] == "b" {
			if fields[0] == "B" {
				user, err := strconv.ParseInt(fields[1], 10, 64)
				if err != nil {
					return bad
				}
				inFlight[[2]int64{user, nums[2]}]++
				continue
			}
			user, amount := nums[2], nums[3]
			k := [2]int64{user, amount}
			if inFlight[k] == 0 {
				return bad
			}
			inFlight[k]--
			c := out.balances[user]
			if c == nil {
				c = &credits{}
				out.balances[user] = c
			}
			c.acked += amount
			c.n++
			continue
		}
		if len(fields) < 3 || len(fields[1]) != 1 || (fields[1][0] != 'm' && fields[1][0] != 'r') {
			return bad
		}
		k := rowKey{fields[1][0], nums[2]}
		w := out.rows[k]
		// An update or a delete only follows an acknowledged write of a row that exists.
		follows := w != nil && w.pending == 0 && w.present
		switch {
		case fields[0] == "I" && (k.t == 'm' && len(fields) == 5 || k.t == 'r' && len(fields) == 6):
			if w != nil {
				return bad
			}
			sum, err := strconv.ParseUint(fields[4], 10, 64)
			if err != nil {
				return bad
			}
			w = &written{user: nums[3], pending: 'I', pendSum: sum}
			if k.t == 'r' {
				w.message = nums[5]
			}
			out.rows[k] = w
		case len(fields) == 4 && fields[0] == "U":
			sum, err := strconv.ParseUint(fields[3], 10, 64)
			if err != nil || !follows {
				return bad
			}
			w.pending, w.pendSum = 'U', sum
		case len(fields) == 3 && fields[0] == "D":
			if !follows {
				return bad
			}
			w.pending = 'D'
		case len(fields) == 3 && fields[0] == "A":
			if w == nil || w.pending == 0 {
				return bad
			}
			switch w.pending {
			case 'I':
				w.acked, w.present, w.sum = true, true, w.pendSum
			case 'U':
				w.updates++
				w.sum = w.pendSum
			case 'D':
				w.deleted, w.present = true, false
			}
			w.pending, w.pendSum = 0, 0
		default:
			return bad
		}
	}
	for k, n := range inFlight {
		c := out.balances[k[0]]
		if c == nil && n > 0 {
			c = &credits{}
			out.balances[k[0]] = c
		}
		for range n {
			c.pending = append(c.pending, k[1])
		}
	}
	return nil
}

// idClock hands out the IDs of the messages one writer goroutine writes: microseconds since
// 2020 times 1024 plus the writer's slot (application process*16 + writer), strictly
// increasing per writer. No two writers share a slot, and a restarted process starts
// milliseconds after its predecessor's last ID, so IDs never repeat without any coordination;
// they are far above the loaded messages' (user*1e6 + n < 1e12), and grow with time, as an
// append-only table's keys do.
type idClock struct {
	slot int64
	last int64
}

const idEpoch = 1577836800_000_000 // 2020-01-01 in Unix microseconds

func (c *idClock) next() int64 {
	id := (time.Now().UnixMicro()-idEpoch)<<10 | c.slot
	if id <= c.last {
		id = c.last + 1024
	}
	c.last = id
	return id
}
