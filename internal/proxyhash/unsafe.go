// This file encapsulates usage of unsafe.

package proxyhash

import "unsafe"

// bytesOf returns the bytes of s without copying them. The hash functions only read the
// slice, so the string's immutability is preserved.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
