package guestmem

import "unsafe"

const haveStreamStores = true

// copyLines copies lines 64-byte lines from src to dst with non-temporal
// stores (copystream_amd64.s). dst must be 64-byte aligned and lines at
// least 1: CopyStream checks both.
//
//go:noescape
func copyLines(dst, src unsafe.Pointer, lines int)

// StreamFence orders the non-temporal stores before it before every store
// after it (SFENCE).
func StreamFence()
