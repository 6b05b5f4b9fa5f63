package wsserve

// frameTrack follows the WebSocket frame boundaries of what a client sends,
// from the raw bytes nbio reads and before nbio parses them, to catch the
// two RFC 6455 violations nbio v1.6.8 lets through: a client frame without
// the mask bit (RFC 6455 5.1: the server must close, 1002), and an empty
// data message (nbio drops it silently; for corral an empty frame is
// malformed, 1002). It also catches the framing errors nbio refuses by
// cutting TCP without a close frame (RSV bits without an extension, a
// reserved opcode, a control frame over 125 bytes or fragmented, a
// continuation without a start, a message inside a fragmented one), so
// that the session closes those with 1002 as RFC 6455 7.4.1 asks. wsserve
// negotiates no extension (nbio's EnableCompression stays false), so any
// RSV bit is an error.
//
// It keeps 8 bytes: no buffer, no allocation. Headers split across reads
// and 16- and 64-bit payload lengths are followed byte by byte; payload
// bytes are skipped. A declared length over 4 GiB stops the tracking: nbio
// refuses a frame that large itself (MaxWebsocketFramePayloadSize).
//
// The zero value is ready at the start of a stream. A frameTrack is not
// safe for concurrent use; nbio reads a connection from one goroutine at a
// time.
type frameTrack struct {
	left uint32 // payload bytes left in the current frame, or the length being read
	n    uint8  // header bytes seen of the current frame; 0 between frames and in payload
	b0   uint8  // first header byte: FIN, RSV, opcode
	b1   uint8  // second header byte: MASK, 7-bit length
	st   uint8  // trackOpen, trackEmpty, trackOff, trackFailed; the verdict above bit 4
}

const (
	trackOpen   = 1 << iota // a fragmented data message is in progress
	trackEmpty              // the message in progress has had no payload byte yet
	trackOff                // tracking stopped (nbio refuses what follows)
	trackFailed             // a violation was reported: drop everything after
)

// frameVerdict is what feed found.
type frameVerdict uint8

const (
	frameOK       frameVerdict = iota // nothing wrong so far
	frameUnmasked                     // a client frame without the mask bit
	frameEmpty                        // an empty data message
	frameRSV                          // an RSV bit without an extension
	frameOpcode                       // a reserved opcode
	frameControl                      // a control frame over 125 bytes or fragmented
	frameSequence                     // a continuation without a start, or a message inside one
	frameDead                         // a violation was reported before: drop the bytes
)

// reason returns the close reason for a violation.
func (v frameVerdict) reason() string {
	switch v {
	case frameUnmasked:
		return "unmasked client frame"
	case frameEmpty:
		return "empty data message"
	case frameRSV:
		return "RSV bit set without an extension"
	case frameOpcode:
		return "reserved opcode"
	case frameControl:
		return "control frame over 125 bytes or fragmented"
	case frameSequence:
		return "fragments out of sequence"
	}
	return ""
}

// extLen returns how many extended length bytes follow the second header
// byte.
func (f *frameTrack) extLen() uint8 {
	switch f.b1 & 0x7f {
	case 126:
		return 2
	case 127:
		return 8
	}
	return 0
}

// feed follows p, the next bytes read from the client, and returns the
// first violation it finds. After a violation every later call returns
// frameDead.
func (f *frameTrack) feed(p []byte) frameVerdict {
	if f.st&trackFailed != 0 {
		return frameDead
	}
	for len(p) > 0 {
		if f.st&trackOff != 0 {
			return frameOK
		}
		if f.n == 0 && f.left > 0 { // payload: skip it
			k := uint32(len(p))
			if uint64(len(p)) > uint64(f.left) {
				k = f.left
			}
			f.left -= k
			p = p[k:]
			continue
		}
		b := p[0]
		p = p[1:]
		switch f.n {
		case 0:
			f.b0 = b
			f.n = 1
			continue
		case 1:
			f.b1 = b
			f.n = 2
			if b&0x80 == 0 {
				return f.fail(frameUnmasked)
			}
			f.left = 0
			if l := b & 0x7f; l < 126 {
				f.left = uint32(l)
			}
		default:
			if i := f.n - 2; i < f.extLen() {
				if f.extLen() == 8 && i < 4 {
					if b != 0 { // 4 GiB or more: nbio refuses the frame
						f.st |= trackOff
						return frameOK
					}
				} else {
					f.left = f.left<<8 | uint32(b)
				}
			}
			f.n++
		}
		if f.n < 2+f.extLen()+4 { // the masking key ends the header
			continue
		}
		f.n = 0
		if v := f.frame(); v != frameOK {
			return f.fail(v)
		}
	}
	return frameOK
}

// fail records the violation v and returns it.
func (f *frameTrack) fail(v frameVerdict) frameVerdict {
	f.st |= trackFailed | uint8(v)<<4
	return v
}

// failed returns the violation recorded, or frameOK.
func (f *frameTrack) failed() frameVerdict {
	if f.st&trackFailed == 0 {
		return frameOK
	}
	return frameVerdict(f.st >> 4)
}

// frame judges a complete frame header.
func (f *frameTrack) frame() frameVerdict {
	fin := f.b0&0x80 != 0
	if f.b0&0x70 != 0 {
		return frameRSV
	}
	switch op := f.b0 & 0x0f; op {
	case 8, 9, 10: // close, ping, pong
		if !fin || f.left > 125 {
			return frameControl
		}
	case 1, 2: // text, binary: a message starts
		if f.st&trackOpen != 0 {
			return frameSequence
		}
		if fin {
			f.st &^= trackOpen | trackEmpty
			if f.left == 0 {
				return frameEmpty
			}
			return frameOK
		}
		f.st |= trackOpen | trackEmpty
		if f.left > 0 {
			f.st &^= trackEmpty
		}
	case 0: // continuation
		if f.st&trackOpen == 0 {
			return frameSequence
		}
		if f.left > 0 {
			f.st &^= trackEmpty
		}
		if fin {
			empty := f.st&trackEmpty != 0
			f.st &^= trackOpen | trackEmpty
			if empty {
				return frameEmpty
			}
		}
	default:
		return frameOpcode
	}
	return frameOK // control frames may be empty
}
