package storage

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/duraton/duraton/storage/kv"
)

const (
	bucketTokens   = "tokens"
	bucketDue      = "due"
	bucketProjects = "projects"

	bucketMeta     = "meta"
	bucketMessages = "messages"
	bucketLogs     = "logs"
	bucketDLQ      = "dlq"
	bucketQueues   = "queues"
	bucketDedup    = "dedup"

	keyProject = "project"
)

var projectBuckets = [...]string{bucketMeta, bucketMessages, bucketLogs, bucketDLQ, bucketQueues, bucketDedup,
	bucketRuns, bucketRunData, bucketWaiters, bucketLookback, bucketRunIndex, bucketRateLog, bucketFlowKeys, bucketEventExpiry, bucketSchedules, bucketTopics,
	bucketRunEnded, bucketDedupExpiry, bucketRunSearch}

// Tx is a transaction. Its methods are scoped by project: a project's records can only be
// reached through that project's id.
type Tx struct {
	tx kv.Tx
	// The last project's bucket and the sub-buckets opened in it: an operation touches
	// several sub-buckets of one project, and a group commit runs dozens of operations in
	// one transaction. Opening a nested bucket costs a cursor search and, in a read
	// transaction, a new Bucket each time; the handles stay valid until the transaction
	// ends, and no transaction deletes a project or a sub-bucket.
	project       string
	pb            kv.Bucket
	subs          [8]subBucket
	nsubs         int
	projects, due kv.Bucket // root buckets, opened once
	// track and runs: the runs the running function changed, when it asked (touched.go).
	track bool
	runs  []RunRef
}

// projectsBucket is the root bucket of projects.
func (t *Tx) projectsBucket() kv.Bucket {
	if t.projects == nil {
		t.projects = t.tx.Bucket([]byte(bucketProjects))
	}
	return t.projects
}

// dueBucket is the root bucket of the due index.
func (t *Tx) dueBucket() kv.Bucket {
	if t.due == nil {
		t.due = t.tx.Bucket([]byte(bucketDue))
	}
	return t.due
}

type subBucket struct {
	name string
	b    kv.Bucket
}

// projectBucket returns a project's bucket, nil when it does not exist.
func (t *Tx) projectBucket(project string) kv.Bucket {
	if t.pb != nil && t.project == project {
		return t.pb
	}
	p := t.projectsBucket().Bucket([]byte(project))
	if p != nil {
		t.project, t.pb, t.nsubs = project, p, 0
	}
	return p
}

// cachedSub returns the project bucket p's sub-bucket name if it was opened before.
func (t *Tx) cachedSub(p kv.Bucket, name string) kv.Bucket {
	if p != t.pb {
		return nil
	}
	for _, s := range t.subs[:t.nsubs] {
		if s.name == name {
			return s.b
		}
	}
	return nil
}

// keepSub remembers the project bucket p's sub-bucket name (the first few only).
func (t *Tx) keepSub(p kv.Bucket, name string, b kv.Bucket) {
	if p == t.pb && b != nil && t.nsubs < len(t.subs) {
		t.subs[t.nsubs] = subBucket{name: name, b: b}
		t.nsubs++
	}
}

// bucket returns a project's sub-bucket, or nil when the project does not exist (reads
// then find nothing; writes fail with ErrNotFound).
func (t *Tx) bucket(project, name string) kv.Bucket {
	p := t.projectBucket(project)
	if p == nil {
		return nil
	}
	if b := t.cachedSub(p, name); b != nil {
		return b
	}
	b := p.Bucket([]byte(name))
	t.keepSub(p, name, b)
	return b
}

// writeBucket returns a project's sub-bucket for writing, creating it if the project
// predates it (data files from older versions).
func (t *Tx) writeBucket(project, name string) (kv.Bucket, error) {
	p := t.projectBucket(project)
	if p == nil {
		return nil, fmt.Errorf("project %q: %w", project, ErrNotFound)
	}
	if b := t.cachedSub(p, name); b != nil {
		return b, nil
	}
	b, err := p.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, err
	}
	t.keepSub(p, name, b)
	return b, nil
}

func put(b kv.Bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), data)
}

func get(b kv.Bucket, key string, v any) error {
	if b == nil {
		return ErrNotFound
	}
	data := b.Get([]byte(key))
	if data == nil {
		return ErrNotFound
	}
	return json.Unmarshal(data, v) // Unmarshal copies out of the mmap.
}

// ---- projects and tokens

// CreateProject stores a new project with its own buckets. It fails if the id exists.
func (t *Tx) CreateProject(p *Project) error {
	root := t.tx.Bucket([]byte(bucketProjects))
	pb, err := root.CreateBucket([]byte(p.ID))
	if err != nil {
		return fmt.Errorf("create project %q: %w", p.ID, err)
	}
	for _, name := range projectBuckets {
		if _, err := pb.CreateBucket([]byte(name)); err != nil {
			return err
		}
	}
	meta := pb.Bucket([]byte(bucketMeta))
	for _, mark := range []string{keySweepIndexes, keySearchIndexes} { // a new project's indexes are complete
		if err := meta.Put([]byte(mark), []byte{1}); err != nil {
			return err
		}
	}
	return put(meta, keyProject, p)
}

// PutProject overwrites an existing project's record (e.g. after a key rotation).
func (t *Tx) PutProject(p *Project) error {
	b, err := t.writeBucket(p.ID, bucketMeta)
	if err != nil {
		return err
	}
	return put(b, keyProject, p)
}

// Project reads a project.
func (t *Tx) Project(id string) (*Project, error) {
	var p Project
	if err := get(t.bucket(id, bucketMeta), keyProject, &p); err != nil {
		return nil, fmt.Errorf("project %q: %w", id, err)
	}
	return &p, nil
}

// root returns one of the root buckets the store makes when it opens (OpenEngine). It
// is missing only when the engine's read failed — the engine then fails the whole
// transaction with that error — or the data is damaged; the error says which bucket.
func (t *Tx) root(name string) (kv.Bucket, error) {
	if b := t.tx.Bucket([]byte(name)); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("storage: the %s bucket could not be read", name)
}

// Projects lists every project.
func (t *Tx) Projects() ([]Project, error) {
	var out []Project
	root, err := t.root(bucketProjects)
	if err != nil {
		return nil, err
	}
	err = root.ForEachBucket(func(k []byte) error {
		p, err := t.Project(string(k))
		if err != nil {
			return err
		}
		out = append(out, *p)
		return nil
	})
	return out, err
}

// PutToken binds a token hash to a project.
func (t *Tx) PutToken(tokenHash, project string) error {
	b, err := t.root(bucketTokens)
	if err != nil {
		return err
	}
	return b.Put([]byte(tokenHash), []byte(project))
}

// TokenProject returns the project a token hash belongs to.
func (t *Tx) TokenProject(tokenHash string) (string, error) {
	b, err := t.root(bucketTokens)
	if err != nil {
		return "", err
	}
	v := b.Get([]byte(tokenHash))
	if v == nil {
		return "", ErrNotFound
	}
	return string(v), nil
}

// TokenProjectIn is TokenProject read straight from an engine, without a Store: for a
// follower replica, which keeps none. ErrNotFound also before any Store initialised
// the engine.
func TokenProjectIn(e kv.Engine, tokenHash string) (string, error) {
	var project string
	err := e.View(func(tx kv.Tx) error {
		b := tx.Bucket([]byte(bucketTokens))
		if b == nil {
			return ErrNotFound
		}
		v := b.Get([]byte(tokenHash))
		if v == nil {
			return ErrNotFound
		}
		project = string(v)
		return nil
	})
	return project, err
}

// ---- messages

// PutMessage writes a message record.
func (t *Tx) PutMessage(m *Message) error {
	b, err := t.writeBucket(m.Project, bucketMessages)
	if err != nil {
		return err
	}
	data, err := encodeMessage(make([]byte, 0, messageSizeHint(m)), m)
	if err != nil {
		return err
	}
	return b.Put([]byte(m.ID), data)
}

// Message reads a pending message.
func (t *Tx) Message(project, id string) (*Message, error) {
	b := t.bucket(project, bucketMessages)
	if b == nil {
		return nil, ErrNotFound
	}
	data := b.Get([]byte(id))
	if data == nil {
		return nil, ErrNotFound
	}
	var m Message
	if err := decodeMessage(data, &m); err != nil {
		return nil, fmt.Errorf("message %s: %w", id, err)
	}
	return &m, nil
}

// DeleteMessage removes a message record.
func (t *Tx) DeleteMessage(project, id string) error {
	b, err := t.writeBucket(project, bucketMessages)
	if err != nil {
		return err
	}
	return b.Delete([]byte(id))
}

// ForEachMessage calls fn for a project's pending messages in id (creation) order until
// fn returns false.
func (t *Tx) ForEachMessage(project string, fn func(*Message) bool) error {
	b := t.bucket(project, bucketMessages)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var m Message
		if err := decodeMessage(v, &m); err != nil {
			return fmt.Errorf("message %s: %w", k, err)
		}
		if !fn(&m) {
			return nil
		}
	}
	return nil
}

// ---- logs

// AppendLog stores a log event; ev.ID must be time ordered (IDGen).
func (t *Tx) AppendLog(project string, ev *LogEvent) error {
	b, err := t.writeBucket(project, bucketLogs)
	if err != nil {
		return err
	}
	return b.Put([]byte(ev.ID), encodeLogEvent(make([]byte, 0, logEventSizeHint(ev)), ev))
}

// ListLogs returns up to count events newest first, starting strictly before the id
// `before` ("" = from the newest), that match keep, and no more once their stored size
// reaches maxBytes (0: no byte limit; a page has at least one event). next is the id to
// pass as `before` for the following page, "" when there are no more.
func (t *Tx) ListLogs(project, before string, count, maxBytes int, keep func(*LogEvent) bool) (out []LogEvent, next string, err error) {
	b := t.bucket(project, bucketLogs)
	if b == nil {
		return nil, "", nil
	}
	size := 0
	err = scanBackward(b, before, func(k, v []byte) (bool, error) {
		if len(out) == count || pageFull(size, maxBytes) {
			next = out[len(out)-1].ID
			return false, nil
		}
		var ev LogEvent
		if err := decodeLogEvent(v, &ev); err != nil {
			return false, fmt.Errorf("log %s: %w", k, err)
		}
		if keep(&ev) {
			out = append(out, ev)
			size += len(v)
		}
		return true, nil
	})
	return out, next, err
}

// DeleteLogsBefore removes up to limit log events with ids below `before` and returns how
// many it removed.
func (t *Tx) DeleteLogsBefore(project, before string, limit int) (int, error) {
	return deletePrefixBelow(t.bucket(project, bucketLogs), before, limit)
}

// scanBackward walks b from the key just below `before` ("" = the last key) down.
// pageFull reports whether a page of size stored bytes has reached maxBytes (0: never).
func pageFull(size, maxBytes int) bool { return maxBytes > 0 && size >= maxBytes }

func scanBackward(b kv.Bucket, before string, fn func(k, v []byte) (bool, error)) error {
	c := b.Cursor()
	var k, v []byte
	if before == "" {
		k, v = c.Last()
	} else {
		k, v = c.Seek([]byte(before))
		if k == nil {
			k, v = c.Last()
		}
		for k != nil && bytes.Compare(k, []byte(before)) >= 0 {
			k, v = c.Prev()
		}
	}
	for ; k != nil; k, v = c.Prev() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func deletePrefixBelow(b kv.Bucket, below string, limit int) (int, error) {
	if b == nil {
		return 0, nil
	}
	c := b.Cursor()
	n := 0
	for k, _ := c.First(); k != nil && n < limit && string(k) < below; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// ---- dead letters

// PutDLQ stores a dead-lettered message.
func (t *Tx) PutDLQ(project string, e *DLQEntry) error {
	b, err := t.writeBucket(project, bucketDLQ)
	if err != nil {
		return err
	}
	return put(b, e.DLQID, e)
}

// DLQ reads one dead letter.
func (t *Tx) DLQ(project, id string) (*DLQEntry, error) {
	var e DLQEntry
	if err := get(t.bucket(project, bucketDLQ), id, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// DeleteDLQ removes one dead letter; ErrNotFound when absent.
func (t *Tx) DeleteDLQ(project, id string) error {
	b := t.bucket(project, bucketDLQ)
	if b == nil || b.Get([]byte(id)) == nil {
		return ErrNotFound
	}
	return b.Delete([]byte(id))
}

// ListDLQ returns up to count dead letters newest first, before the id `before` ("" =
// from the newest), that match keep, within maxBytes as ListLogs; next continues the
// listing ("" at the end).
func (t *Tx) ListDLQ(project, before string, count, maxBytes int, keep func(*DLQEntry) bool) (out []DLQEntry, next string, err error) {
	b := t.bucket(project, bucketDLQ)
	if b == nil {
		return nil, "", nil
	}
	size := 0
	err = scanBackward(b, before, func(k, v []byte) (bool, error) {
		if len(out) == count || pageFull(size, maxBytes) {
			next = out[len(out)-1].DLQID
			return false, nil
		}
		var e DLQEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return false, fmt.Errorf("dlq %s: %w", k, err)
		}
		if keep(&e) {
			out = append(out, e)
			size += len(v)
		}
		return true, nil
	})
	return out, next, err
}

// DeleteDLQBefore removes up to limit dead letters with ids below `before`.
func (t *Tx) DeleteDLQBefore(project, before string, limit int) (int, error) {
	return deletePrefixBelow(t.bucket(project, bucketDLQ), before, limit)
}

// ---- queues

// PutQueue creates or replaces a queue.
func (t *Tx) PutQueue(project string, q *Queue) error {
	return t.putRecord(project, bucketQueues, q.Name, q)
}

// Queue reads a queue.
func (t *Tx) Queue(project, name string) (*Queue, error) {
	return getRecord[Queue](t.bucket(project, bucketQueues), name)
}

// DeleteQueue removes a queue; ErrNotFound when absent.
func (t *Tx) DeleteQueue(project, name string) error {
	return deleteRecord(t.bucket(project, bucketQueues), name)
}

// QueueCount is the number of a project's queues.
func (t *Tx) QueueCount(project string) int {
	return countRecords(t.bucket(project, bucketQueues))
}

// Queues lists a project's queues by name.
func (t *Tx) Queues(project string) ([]Queue, error) {
	return listRecords[Queue](t.bucket(project, bucketQueues), "queue")
}

// ---- deduplication

// Dedup reads a deduplication record.
func (t *Tx) Dedup(project, id string) (*DedupRecord, error) {
	var r DedupRecord
	if err := get(t.bucket(project, bucketDedup), id, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
