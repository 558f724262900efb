//go:build linux || darwin || freebsd

package wasm

import "syscall"

// reserve maps n bytes of address space that cannot be touched yet: it
// costs neither memory nor commit charge until commit.
func reserve(n uint64) ([]byte, error) {
	return syscall.Mmap(-1, 0, int(n), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

// commit makes part of a reserved range readable and writable; its pages
// are zero until written.
func commit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return syscall.Mprotect(b, syscall.PROT_READ|syscall.PROT_WRITE)
}

func unreserve(b []byte) { syscall.Munmap(b) }
