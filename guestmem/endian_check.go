//go:build !(amd64 || arm64 || riscv64 || ppc64le || loong64 || 386 || arm || mipsle || mips64le || wasm)

package guestmem

// Rings are little-endian and access.go reads them with native loads; a
// big-endian build would silently byte-swap every field.
var _ = "guestmem needs a little-endian host" + 1
