package main

import (
	"encoding/binary"
	"io"
	"time"
)

// The pcap file format (what tcpdump -w writes and tcpdump -r and
// Wireshark read): a file header, then per frame a record header and the
// bytes captured. Written here rather than with gopacket's pcapgo: pcapgo
// links gopacket's layers, whose initialisation alone takes the daemon
// (the same binary) from 9 to 17 MB of RSS, for 40 lines of format.
// Little-endian, microsecond timestamps, Ethernet.

const (
	pcapMagic        = 0xa1b2c3d4 // microsecond timestamps
	pcapVersionMajor = 2
	pcapVersionMinor = 4
	linkTypeEthernet = 1 // LINKTYPE_ETHERNET, tcpdump's EN10MB
	pcapFileHeader   = 24
	pcapRecordHeader = 16
)

// pcapWriter writes a pcap stream to w.
type pcapWriter struct {
	w   io.Writer
	hdr [pcapFileHeader]byte
}

// newPcapWriter writes the file header, for frames of at most snapLen
// bytes captured.
func newPcapWriter(w io.Writer, snapLen int) (*pcapWriter, error) {
	p := &pcapWriter{w: w}
	h := p.hdr[:pcapFileHeader]
	le := binary.LittleEndian
	le.PutUint32(h[0:], pcapMagic)
	le.PutUint16(h[4:], pcapVersionMajor)
	le.PutUint16(h[6:], pcapVersionMinor)
	le.PutUint32(h[8:], 0)  // the timestamps are UTC
	le.PutUint32(h[12:], 0) // their accuracy: as always, 0
	le.PutUint32(h[16:], uint32(snapLen))
	le.PutUint32(h[20:], linkTypeEthernet)
	_, err := w.Write(h)
	return p, err
}

// frame writes one record: data is what was captured of a frame of
// wireLen bytes.
func (p *pcapWriter) frame(at time.Time, wireLen int, data []byte) error {
	h := p.hdr[:pcapRecordHeader]
	le := binary.LittleEndian
	us := at.UnixMicro()
	le.PutUint32(h[0:], uint32(us/1e6))
	le.PutUint32(h[4:], uint32(us%1e6))
	le.PutUint32(h[8:], uint32(len(data)))
	le.PutUint32(h[12:], uint32(max(wireLen, len(data))))
	if _, err := p.w.Write(h); err != nil {
		return err
	}
	_, err := p.w.Write(data)
	return err
}
