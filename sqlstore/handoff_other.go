//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package sqlstore

// Without flock(2) no access says it waits, and the Store never yields (see handoff.go).

func lockWaiting(string) (unlock func()) { return func() {} }

func waiting(string) bool { return false }
