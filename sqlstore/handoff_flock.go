//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sqlstore

import (
	"os"
	"syscall"
)

// lockWaiting takes a shared lock of the file name, creating it if need be, and returns what
// releases it; nothing if the file cannot be opened or locked at once.
func lockWaiting(name string) (unlock func()) {
	f, err := os.OpenFile(name, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing releases the lock
}

// waiting reports whether a shared lock of the file name is held: the file exists and an
// exclusive lock cannot be taken at once.
func waiting(name string) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == syscall.EWOULDBLOCK
}
