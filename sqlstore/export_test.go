package sqlstore

// AdvisoryKeys returns the advisory lock keys a fence change of owner takes on PostgreSQL
// (namespace and key), and those of migration's token lock: tests hold them by hand.
func (s *Store) AdvisoryKeys(owner, migration string) (ns, key, epoch, mkey int32) {
	return fenceNS, lockKey(owner), epochNS, lockKey(migration)
}
