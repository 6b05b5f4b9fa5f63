package shard

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// StoreParams are the assigner parameters a store was built with. A store
// holds hands for one set of parameters only: reopening it with others is
// refused, since the stored hands would not satisfy them.
type StoreParams struct {
	Workers    int    `json:"workers"`
	HandSize   int    `json:"hand_size"`
	MaxOverlap int    `json:"max_overlap"`
	Seed       uint64 `json:"seed"`
}

// Store persists an Assigner's hands. Implementations need not be safe for
// concurrent use: the Assigner serialises its calls.
type Store interface {
	// Load reports the parameters the store was initialised with (ok false
	// for an empty store) and calls fn for every stored hand in the order
	// they were appended. An error from fn stops Load and is returned.
	Load(fn func(id string, hand []int) error) (p StoreParams, ok bool, err error)
	// Init records the parameters of an empty store.
	Init(p StoreParams) error
	// Append adds one assignment. It may buffer; Sync makes it durable.
	Append(id string, hand []int) error
	// Sync makes every appended assignment durable.
	Sync() error
	// Close syncs and releases the store.
	Close() error
}

// fileMagic starts every store file; the digit is the format version.
const fileMagic = "CRLSHRD1"

// maxRecord bounds a record's payload so that a corrupt length cannot make
// Load allocate without limit.
const maxRecord = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FileStore is the default Store: an append-only file. After an 8-byte
// magic, every record is a uvarint payload length, the payload and its
// CRC-32C (little endian). The first record holds the parameters ('P',
// then workers, hand size and max overlap as uvarints and the seed as 8
// bytes); each following record one assignment ('A', the id length and id,
// then the hand's workers as uvarints). Appending never rewrites earlier
// bytes, so a crash can only leave a torn last record, which Load reports
// (with its offset) instead of guessing.
//
// A FileStore is used by one Assigner in one process at a time; it is not
// safe for concurrent use by itself.
type FileStore struct {
	path   string
	f      *os.File
	w      *bufio.Writer
	loaded bool
	buf    []byte // payload scratch
	rec    []byte // record scratch
}

var _ Store = (*FileStore)(nil)

// OpenFileStore opens or creates the store file at path.
func OpenFileStore(path string) (*FileStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("shard: store: %w", err)
	}
	return &FileStore{path: path, f: f}, nil
}

// storeErr formats a problem found at byte offset off of the file.
func (s *FileStore) storeErr(off int64, format string, args ...any) error {
	return fmt.Errorf("shard: store %s: byte %d: %s (the file is corrupt or truncated)", s.path, off, fmt.Sprintf(format, args...))
}

// Load implements Store. It must be called once, before Init or Append.
func (s *FileStore) Load(fn func(id string, hand []int) error) (StoreParams, bool, error) {
	if s.loaded {
		return StoreParams{}, false, fmt.Errorf("shard: store %s: Load called twice", s.path)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return StoreParams{}, false, fmt.Errorf("shard: store %s: %w", s.path, err)
	}
	r := &countingReader{r: bufio.NewReaderSize(s.f, 1<<16)}
	var magic [len(fileMagic)]byte
	n, err := io.ReadFull(r, magic[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		s.loaded = true
		return StoreParams{}, false, s.startAppend()
	case err != nil:
		return StoreParams{}, false, s.storeErr(0, "short header: %v", err)
	case string(magic[:]) != fileMagic:
		return StoreParams{}, false, s.storeErr(0, "not a corral shard store (magic %q)", magic[:])
	}
	var p StoreParams
	first := true
	var hand []int
	var buf []byte
	for {
		off := r.n
		payload, err := readRecord(r, &buf)
		if errors.Is(err, io.EOF) && !first {
			break
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("no parameter record")
			}
			return StoreParams{}, false, s.storeErr(off, "%v", err)
		}
		d := decoder{b: payload}
		if first {
			if d.byte() != 'P' {
				return StoreParams{}, false, s.storeErr(off, "first record is not the parameter record")
			}
			p.Workers, p.HandSize, p.MaxOverlap = d.int(), d.int(), d.int()
			p.Seed = d.u64()
			if d.bad || len(d.b) != 0 {
				return StoreParams{}, false, s.storeErr(off, "malformed parameter record")
			}
			first = false
			continue
		}
		if d.byte() != 'A' {
			return StoreParams{}, false, s.storeErr(off, "unknown record type")
		}
		id := d.str()
		hand = hand[:0]
		for len(d.b) > 0 && !d.bad {
			hand = append(hand, d.int())
		}
		if d.bad {
			return StoreParams{}, false, s.storeErr(off, "malformed assignment record")
		}
		if err := fn(id, hand); err != nil {
			return StoreParams{}, false, fmt.Errorf("shard: store %s: byte %d: %w", s.path, off, err)
		}
	}
	s.loaded = true
	return p, true, s.startAppend()
}

// startAppend positions the writer at the end of the file.
func (s *FileStore) startAppend() error {
	if _, err := s.f.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("shard: store %s: %w", s.path, err)
	}
	s.w = bufio.NewWriterSize(s.f, 1<<16)
	return nil
}

// Init implements Store.
func (s *FileStore) Init(p StoreParams) error {
	if s.w == nil {
		return fmt.Errorf("shard: store %s: Init before a successful Load", s.path)
	}
	if _, err := s.w.WriteString(fileMagic); err != nil {
		return fmt.Errorf("shard: store %s: %w", s.path, err)
	}
	b := append(s.buf[:0], 'P')
	b = binary.AppendUvarint(b, uint64(p.Workers))
	b = binary.AppendUvarint(b, uint64(p.HandSize))
	b = binary.AppendUvarint(b, uint64(p.MaxOverlap))
	b = binary.LittleEndian.AppendUint64(b, p.Seed)
	s.buf = b
	return s.writeRecord(b)
}

// Append implements Store.
func (s *FileStore) Append(id string, hand []int) error {
	if s.w == nil {
		return fmt.Errorf("shard: store %s: Append before a successful Load", s.path)
	}
	b := append(s.buf[:0], 'A')
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	for _, w := range hand {
		b = binary.AppendUvarint(b, uint64(w))
	}
	s.buf = b
	return s.writeRecord(b)
}

func (s *FileStore) writeRecord(payload []byte) error {
	rec := binary.AppendUvarint(s.rec[:0], uint64(len(payload)))
	rec = append(rec, payload...)
	rec = binary.LittleEndian.AppendUint32(rec, crc32.Checksum(payload, castagnoli))
	s.rec = rec
	if _, err := s.w.Write(rec); err != nil {
		return fmt.Errorf("shard: store %s: %w", s.path, err)
	}
	return nil
}

// Sync implements Store.
func (s *FileStore) Sync() error {
	if s.w == nil {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("shard: store %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("shard: store %s: %w", s.path, err)
	}
	return nil
}

// Close implements Store.
func (s *FileStore) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.Sync()
	if cerr := s.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("shard: store %s: %w", s.path, cerr)
	}
	s.f, s.w = nil, nil
	return err
}

// countingReader counts the bytes read, for error offsets.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// readRecord reads one record and checks its checksum. It returns io.EOF
// only at a clean end of file.
// The payload is read into (and may reallocate) *buf.
func readRecord(r *countingReader, buf *[]byte) ([]byte, error) {
	start := r.n
	size, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) && r.n == start {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("bad record length: %v", err)
	}
	if size == 0 || size > maxRecord {
		return nil, fmt.Errorf("record length %d out of range", size)
	}
	if uint64(cap(*buf)) < size+4 {
		*buf = make([]byte, size+4)
	}
	b := (*buf)[:size+4]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("truncated record of %d bytes", size)
	}
	payload := b[:size]
	if binary.LittleEndian.Uint32(b[size:]) != crc32.Checksum(payload, castagnoli) {
		return nil, errors.New("checksum mismatch")
	}
	return payload, nil
}

// decoder reads the fields of a record payload; bad records a malformed
// field and makes every later read return zero.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) byte() byte {
	if d.bad || len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a uvarint that must fit a worker index.
func (d *decoder) int() int {
	v := d.uvarint()
	if v > MaxWorkers {
		d.bad = true
		return 0
	}
	return int(v)
}

func (d *decoder) u64() uint64 {
	if d.bad || len(d.b) < 8 {
		d.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
