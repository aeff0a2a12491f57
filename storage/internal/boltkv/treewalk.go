package boltkv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/duraton/duraton/storage/kv"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The tree walk: every page of the data file's B+trees, read from the file without
// bbolt, checked for what bbolt asserts on (or trusts) when it walks them itself. bbolt
// rebuilds its freelist at open (NoFreelistSync) by walking the tree in a goroutine of
// its own, where a damaged page (one that does not carry its own number, a child page
// past the end, a cycle) panics beyond any recover, and `tx.Check` does the same walk
// first. Walking it here before bbolt does turns that damage into kv.ErrCorrupt.

const (
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	bucketLeafFlag = 0x01
	pageElemSize   = 16 // a branch element (pos, ksize, pgid) or a leaf one (flags, pos, ksize, vsize)
	bucketHeader   = 16 // root pgid, sequence
	maxTreeDepth   = 64
)

// treeWalker walks one file's trees.
type treeWalker struct {
	f        io.ReaderAt
	pageSize int64
	hwm      uint64
	seen     []uint64 // a bit per page: reached already
}

// walkTree checks the data file at path page by page, read-only, under bbolt's shared
// lock (a running server makes it fail with kv.ErrLocked). The error wraps kv.ErrCorrupt,
// naming the file and the page, for damage.
func walkTree(path string, lockTimeout time.Duration) error {
	f, m, err := validatedFile(path)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	// bbolt's read-only open takes the shared lock and reads the meta pages only (no
	// freelist is loaded): a writer cannot change the file under the walk.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("storage: open %s: %w", path, kv.ErrLocked)
	}
	if err != nil {
		return fmt.Errorf("storage: open %s: %w: %v", path, kv.ErrCorrupt, err)
	}
	defer db.Close()
	if err := checkTree(f, m); err != nil {
		return fmt.Errorf("storage: %s: %w: %v", path, kv.ErrCorrupt, err)
	}
	return nil
}

// checkTree walks the tree of meta m in f.
func checkTree(f io.ReaderAt, m metaPage) (err error) {
	defer func() {
		if r := recover(); r != nil { // a bug of the walk, never a crash of the server
			err = fmt.Errorf("walking the tree: %v", r)
		}
	}()
	w := &treeWalker{f: f, pageSize: int64(m.pageSize), hwm: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
	return w.walk(m.root, nil, nil, 0, "root")
}

// page reads page id and its overflow pages, checking its header.
func (w *treeWalker) page(id uint64, from string) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d (child of %s) is outside the file's pages [2, %d)", id, from, w.hwm)
	}
	head := make([]byte, w.pageSize) // the page, and its overflow pages read below
	if _, err := w.f.ReadAt(head, int64(id)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	le := binary.LittleEndian
	if self := le.Uint64(head); self != id {
		return nil, fmt.Errorf("page %d at offset %d (child of %s) identifies itself as page %d: overwritten", id, int64(id)*w.pageSize, from, self)
	}
	overflow := uint64(le.Uint32(head[12:]))
	if id+overflow >= w.hwm {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the file's %d pages", id, overflow, w.hwm)
	}
	for p := id; p <= id+overflow; p++ {
		if w.seen[p/64]&(1<<(p%64)) != 0 {
			return nil, fmt.Errorf("page %d (child of %s) is reached twice", p, from)
		}
		w.seen[p/64] |= 1 << (p % 64)
	}
	if overflow == 0 {
		return head, nil
	}
	buf := make([]byte, int64(overflow+1)*w.pageSize)
	copy(buf, head)
	if _, err := w.f.ReadAt(buf[w.pageSize:], int64(id+1)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return buf, nil
}

// walk checks the tree rooted at page id, whose keys must lie in [lo, hi) (nil: open).
func (w *treeWalker) walk(id uint64, lo, hi []byte, depth int, from string) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("page %d: the tree is deeper than %d levels (a cycle?)", id, maxTreeDepth)
	}
	p, err := w.page(id, from)
	if err != nil {
		return err
	}
	return w.node(p, id, lo, hi, depth)
}

// node checks the branch or leaf node in p (a page, or a bucket's inline page, id 0).
func (w *treeWalker) node(p []byte, id uint64, lo, hi []byte, depth int) error {
	if len(p) < pageHeaderSize {
		return fmt.Errorf("page %d: shorter than a page header", id)
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if flags != branchPageFlag && flags != leafPageFlag {
		return fmt.Errorf("page %d: type %#x is neither a branch nor a leaf", id, flags)
	}
	if pageHeaderSize+count*pageElemSize > len(p) {
		return fmt.Errorf("page %d: %d elements do not fit in it", id, count)
	}
	if flags == branchPageFlag && count == 0 {
		return fmt.Errorf("page %d: a branch without elements", id)
	}
	var prev []byte
	for i := range count {
		at := pageHeaderSize + i*pageElemSize
		e := p[at : at+pageElemSize]
		var pos, ksize, vsize int
		if flags == branchPageFlag {
			pos, ksize = int(le.Uint32(e)), int(le.Uint32(e[4:]))
		} else {
			pos, ksize, vsize = int(le.Uint32(e[4:])), int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
		}
		start := at + pos
		if pos < 0 || start+ksize+vsize > len(p) || start+ksize+vsize < start {
			return fmt.Errorf("page %d: element %d lies outside the page", id, i)
		}
		key := p[start : start+ksize]
		switch {
		case prev != nil && bytes.Compare(prev, key) >= 0:
			return fmt.Errorf("page %d: keys out of order at element %d", id, i)
		case lo != nil && bytes.Compare(key, lo) < 0, hi != nil && bytes.Compare(key, hi) >= 0:
			return fmt.Errorf("page %d: key of element %d outside the range its parent gives", id, i)
		}
		prev = key
		if flags == branchPageFlag {
			childHi := hi
			if i+1 < count {
				next := pageHeaderSize + (i+1)*pageElemSize
				npos, nksize := int(le.Uint32(p[next:])), int(le.Uint32(p[next+4:]))
				if s := next + npos; npos >= 0 && s+nksize <= len(p) && s+nksize >= s {
					childHi = p[s : s+nksize]
				}
			}
			childLo := key
			if i == 0 {
				childLo = lo // the first element's key may be stale
			}
			if err := w.walk(le.Uint64(e[8:]), childLo, childHi, depth+1, fmt.Sprintf("page %d", id)); err != nil {
				return err
			}
			continue
		}
		if le.Uint32(e)&bucketLeafFlag == 0 {
			continue
		}
		v := p[start+ksize : start+ksize+vsize]
		if len(v) < bucketHeader {
			return fmt.Errorf("page %d: bucket %q has a short header", id, key)
		}
		if root := le.Uint64(v); root != 0 {
			if err := w.walk(root, nil, nil, depth+1, fmt.Sprintf("bucket %q on page %d", key, id)); err != nil {
				return err
			}
		} else if err := w.node(v[bucketHeader:], 0, nil, nil, depth+1); err != nil {
			return fmt.Errorf("inline bucket %q on page %d: %w", key, id, err)
		}
	}
	return nil
}
