package coord

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ConflictError is the error of a compare-and-swap that lost: the record was not at the
// revision the writer read. It wraps ErrConflict.
type ConflictError struct {
	Key     string // the record's key
	Want    int64  // the revision the writer expected (0: that there was no record)
	Current int64  // the record's revision now (0: there is none)
	Writer  string // who wrote the current record ("" when absent or unknown)
}

func (e *ConflictError) Error() string {
	switch {
	case e.Current == 0:
		return fmt.Sprintf("coord: update of %s at revision %d lost: the record has been deleted", e.Key, e.Want)
	case e.Want == 0:
		return fmt.Sprintf("coord: create of %s lost: %s wrote it first, at revision %d", e.Key, writerOrUnknown(e.Writer), e.Current)
	}
	return fmt.Sprintf("coord: update of %s at revision %d lost: %s wrote revision %d first; read it again", e.Key, e.Want, writerOrUnknown(e.Writer), e.Current)
}

func writerOrUnknown(w string) string {
	if w == "" {
		return "another writer"
	}
	return w
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Update writes p as the record if the record is still at revision rev (its ModRevision as
// Current or Get returned it; 0 means there must be no record yet), and returns the new
// revision. Of writers racing from one revision exactly one wins; the others get a
// *ConflictError wrapping ErrConflict and write nothing. p must pass Check (else ErrInput
// and ErrRecord, nothing written); Format and Writer are set to FormatVersion and the
// client's Identity.
func (c *Client) Update(ctx context.Context, rev int64, p Placement) (int64, error) {
	return c.update(ctx, rev, p, nil, nil)
}

// update is Update with an extra comparison (the mover's leadership) that must also hold;
// guardErr says why when it does not.
func (c *Client) update(ctx context.Context, rev int64, p Placement, guard []clientv3.Cmp, guardErr func() error) (int64, error) {
	if rev < 0 {
		return 0, fmt.Errorf("coord: update at negative revision %d: %w", rev, ErrInput)
	}
	data, err := Encode(p, c.identity)
	if err != nil {
		return 0, err
	}
	ctx, cancel := c.requestCtx(ctx)
	defer cancel()
	cmp := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(c.key), "=", rev)}, guard...)
	r, err := c.etcd.Txn(ctx).If(cmp...).
		Then(clientv3.OpPut(c.key, string(data))).
		Else(clientv3.OpGet(c.key)).
		Commit()
	if err != nil {
		return 0, c.unavailable("update "+c.key, err)
	}
	if r.Succeeded {
		return r.Header.Revision, nil
	}
	ce := &ConflictError{Key: c.key, Want: rev}
	if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		ce.Current = kvs[0].ModRevision
		var w struct{ Writer string }
		if json.Unmarshal(kvs[0].Value, &w) == nil { // even from a record this build cannot read
			ce.Writer = w.Writer
		}
	}
	if ce.Current == rev && guardErr != nil {
		return 0, guardErr() // the record matched: the guard failed
	}
	return 0, ce
}
