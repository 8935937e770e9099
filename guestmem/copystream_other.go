//go:build !amd64

package guestmem

import "unsafe"

const haveStreamStores = false

func copyLines(dst, src unsafe.Pointer, lines int) {}

// StreamFence does nothing where CopyStream makes only ordinary stores.
func StreamFence() {}
