package sqlstore

// AdvisoryKeys returns the advisory lock keys a fence change of owner takes on PostgreSQL
// (namespace and key), and those of migration's token lock: tests hold them by hand.
func (s *Store) AdvisoryKeys(owner, migration string) (ns, key, epoch, mkey int32) {
	return fenceNS, lockKey(owner), epochNS, lockKey(migration)
}

// CopyThroughGo makes s copy chunks by reading rows into Go and writing them back, as it
// does on PostgreSQL, even between two SQLite files (which it otherwise copies through
// ATTACH), or not: tests of both paths.
func (s *Store) CopyThroughGo(on bool) { s.goCopies = on }

// AttachFile sets the database file that a copy from SQLite shard i attaches ("" for none),
// as if found there, and returns the one it held.
func (s *Store) AttachFile(i int, file string) string {
	was, _ := s.files.Load(i)
	s.files.Store(i, file)
	w, _ := was.(string)
	return w
}
