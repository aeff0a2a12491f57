package boltkv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	"github.com/duraton/duraton/storage/kv"
)

// The layout of a bbolt meta page (go.etcd.io/bbolt internal/common: page.go, meta.go),
// read here without bbolt so that a damaged file is refused before bbolt maps it: bbolt
// trusts its meta pages, and a file shorter than they claim dies with SIGBUS, a damaged
// tree with a panic in a goroutine no recover can reach.
const (
	pageHeaderSize = 16 // id u64, flags u16, count u16, overflow u32
	metaSize       = 64 // magic, version, pageSize, flags u32; root, sequence, freelist, pgid, txid, checksum u64
	metaChecksumAt = 56 // the checksum covers the bytes before it
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	noFreelist     = ^uint64(0)
	minPageSize    = 1 << 10 // bbolt probes page sizes from 1 KiB ...
	maxPageSize    = 1 << 24 // ... to 16 MiB
)

// metaPage is one decoded meta page.
type metaPage struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) exist in the file
	txid     uint64
}

// decodeMeta decodes the meta page starting at buf[0] and checks it as bbolt does
// (magic, version, checksum) plus what bbolt takes on trust (page size, page ids below
// the high-water mark).
func decodeMeta(buf []byte) (metaPage, error) {
	if len(buf) < pageHeaderSize+metaSize {
		return metaPage{}, errors.New("shorter than a meta page")
	}
	b := buf[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.LittleEndian // bbolt writes native order; every platform we build for is little-endian
	if le.Uint32(b[0:]) != boltMagic {
		return metaPage{}, errors.New("no bbolt magic number (overwritten or not a Duraton data file)")
	}
	if v := le.Uint32(b[4:]); v != boltVersion {
		return metaPage{}, fmt.Errorf("format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:metaChecksumAt])
	if le.Uint64(b[metaChecksumAt:]) != h.Sum64() {
		return metaPage{}, errors.New("checksum mismatch")
	}
	m := metaPage{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	switch {
	case m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0:
		return m, fmt.Errorf("page size %d is not a power of two between %d and %d", m.pageSize, minPageSize, maxPageSize)
	case m.pgid < 3 || m.pgid > 1<<40:
		return m, fmt.Errorf("high-water mark %d pages is out of range", m.pgid)
	case m.root < 2 || m.root >= m.pgid:
		return m, fmt.Errorf("root page %d outside [2, %d)", m.root, m.pgid)
	case m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid):
		return m, fmt.Errorf("freelist page %d outside [2, %d)", m.freelist, m.pgid)
	}
	return m, nil
}

// Validate checks the data file at path without opening it with bbolt and without
// writing to it: both meta pages valid and agreeing on the page size, and the file at
// least as long as the highest page they claim. A missing file is valid (Open creates
// it); an empty one is not (a crash or a copy gone wrong, not a new database). Errors
// wrap kv.ErrCorrupt and name the file.
func Validate(path string) error {
	f, _, err := validatedFile(path)
	if f != nil {
		f.Close()
	}
	return err
}

// validatedFile opens the data file at path and checks its meta pages (validateFile);
// it returns the open file (nil when there is none, which is valid) and the meta page
// bbolt uses.
func validatedFile(path string) (*os.File, metaPage, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, metaPage{}, nil
	}
	if err != nil {
		return nil, metaPage{}, fmt.Errorf("storage: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, metaPage{}, fmt.Errorf("storage: %w", err)
	}
	m, err := validateFile(f, info.Size())
	if err != nil {
		f.Close()
		return nil, metaPage{}, fmt.Errorf("storage: %s: %w: %v", path, kv.ErrCorrupt, err)
	}
	return f, m, nil
}

// validateFile checks the meta pages and returns the one bbolt uses (the later valid
// one).
func validateFile(f io.ReaderAt, size int64) (metaPage, error) {
	if size == 0 {
		return metaPage{}, errors.New("the file is empty (0 bytes); a new database is never an empty file")
	}
	buf := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return metaPage{}, fmt.Errorf("meta page 0: cannot read (%d-byte file): %w", size, err)
	}
	m0, err0 := decodeMeta(buf)
	pageSize := int64(m0.pageSize)
	if err0 != nil {
		// Find meta page 1 the way bbolt does, by trying each page size.
		pageSize = 0
		for ps := int64(minPageSize); ps <= maxPageSize && ps+int64(len(buf)) <= size; ps <<= 1 {
			if _, err := f.ReadAt(buf, ps); err != nil {
				return metaPage{}, fmt.Errorf("meta page 1: %w", err)
			}
			if m, err := decodeMeta(buf); err == nil && int64(m.pageSize) == ps {
				pageSize = ps
				break
			}
		}
		if pageSize == 0 {
			return metaPage{}, fmt.Errorf("meta page 0: %v; no valid meta page 1 either", err0)
		}
		return metaPage{}, fmt.Errorf("meta page 0: %v (meta page 1 is intact)", err0)
	}
	if size < 2*pageSize {
		return metaPage{}, fmt.Errorf("truncated: %d bytes, shorter than the two meta pages of %d bytes", size, pageSize)
	}
	if _, err := f.ReadAt(buf, pageSize); err != nil {
		return metaPage{}, fmt.Errorf("meta page 1: %w", err)
	}
	m1, err1 := decodeMeta(buf)
	if err1 != nil {
		return metaPage{}, fmt.Errorf("meta page 1: %v (meta page 0 is intact)", err1)
	}
	if m1.pageSize != m0.pageSize {
		return metaPage{}, fmt.Errorf("meta pages disagree on the page size (%d, %d)", m0.pageSize, m1.pageSize)
	}
	hwm := max(m0.pgid, m1.pgid)
	if need := int64(hwm) * pageSize; size < need {
		return metaPage{}, fmt.Errorf("truncated: %d bytes, but the meta pages claim %d pages of %d bytes (%d bytes)", size, hwm, pageSize, need)
	}
	if m1.txid > m0.txid {
		return m1, nil
	}
	return m0, nil
}
