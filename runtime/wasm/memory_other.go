//go:build !(linux || darwin || freebsd)

package wasm

import "errors"

// Without mmap, memories are Go slices (budget.grow).

func reserve(uint64) ([]byte, error) {
	return nil, errors.New("no address-space reservation on this platform")
}

func commit([]byte) error { return nil }

func unreserve([]byte) {}
