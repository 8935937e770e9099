package qemu

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes the "newc" (SVR4, no CRC) cpio format that the Linux
// initramfs unpacker reads. It is written here rather than run through the
// cpio command so that device nodes (/dev/console) and root-owned files can
// be put in the archive without privileges or a staging tree, and so that a
// per-run archive costs no fork.
//
// Several archives concatenated are one initramfs to the kernel (later
// entries replace earlier ones), which is how a guest's per-run script is
// laid over the cached image.
type cpioWriter struct {
	w   io.Writer
	n   int64 // bytes written so far, for 4-byte alignment
	ino uint32
	err error
}

const (
	cpioModeDir  = 0o040000
	cpioModeReg  = 0o100000
	cpioModeLink = 0o120000
	cpioModeChr  = 0o020000
)

func newCPIOWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: w, ino: 1000} }

func (c *cpioWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// entry writes one header, name and body. rdev is major<<8|minor for
// device nodes.
func (c *cpioWriter) entry(name string, mode uint32, body []byte, rmajor, rminor uint32) {
	name = strings.TrimPrefix(name, "/")
	c.ino++
	nlink := 1
	if mode&0o170000 == cpioModeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(body), 0, 0, rmajor, rminor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad()
	c.write(body)
	c.pad()
}

// Dir adds a directory (mode 0755).
func (c *cpioWriter) Dir(name string) { c.entry(name, cpioModeDir|0o755, nil, 0, 0) }

// File adds a regular file with the given permission bits.
func (c *cpioWriter) File(name string, perm uint32, body []byte) {
	c.entry(name, cpioModeReg|perm&0o7777, body, 0, 0)
}

// Symlink adds a symbolic link name -> target.
func (c *cpioWriter) Symlink(name, target string) {
	c.entry(name, cpioModeLink|0o777, []byte(target), 0, 0)
}

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) {
	c.entry(name, cpioModeChr|perm&0o7777, nil, major, minor)
}

// Close writes the trailer. The archive is padded to 512 bytes, as cpio
// does, so that a following archive starts on a clean boundary.
func (c *cpioWriter) Close() error {
	c.entry("TRAILER!!!", 0, nil, 0, 0)
	if r := c.n % 512; r != 0 {
		c.write(make([]byte, 512-r))
	}
	return c.err
}
