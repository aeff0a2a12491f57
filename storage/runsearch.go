package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// Run search indexes. GET /runs filters by workflow, app, triggering event name and
// label within a creation-time range; each of those terms has its entries in one
// bucket ("runsearch"), in creation order per term value:
//
//	kind (1 byte) ‖ uvarint len ‖ value ‖ created-at (unix ms, 8 bytes) ‖ run id → nothing
//
// kinds: 'w' workflow, 'a' app, 'e' event name, 'l' label. A search walks one term's
// entries newest first between its time bounds (or the by-creation index "runindex"
// when no term is given) and checks the other terms by an exact key lookup, so it reads
// the runs it returns and no others of the wrong workflow or period.
//
// Entries are written with the run (IndexRun) and removed with it (DeleteRun). A data
// file from before them gets them on open (migrateSearchIndexes: per project, in
// transactions of migrateBatch runs, then a mark in the project's meta bucket); runs
// stored before format 3 take their workflow and app from the header older versions
// kept them in, and their event name from the initial payload.
const (
	bucketRunSearch = "runsearch"
	// keySearchIndexes, in a project's "meta" bucket, marks the search index built.
	keySearchIndexes = "searchindexes"
	// LegacyWorkflowHeader and LegacyAppHeader are the forward headers that name a native
	// run's workflow and app in runs stored before Run.Workflow and Run.App (equal to
	// sdk/wire's names; a test in delivery/native keeps them so).
	LegacyWorkflowHeader = "Duraton-Workflow"
	LegacyAppHeader      = "Duraton-App"
)

// Search term kinds.
const (
	termWorkflow = 'w'
	termApp      = 'a'
	termEvent    = 'e'
	termLabel    = 'l'
)

type searchTerm struct {
	kind  byte
	value string
}

func termPrefix(kind byte, value string) []byte {
	k := make([]byte, 0, 1+binary.MaxVarintLen64+len(value)+8+32)
	k = append(k, kind)
	k = binary.AppendUvarint(k, uint64(len(value)))
	return append(k, value...)
}

func termKey(t searchTerm, createdAt int64, runID string) []byte {
	k := termPrefix(t.kind, t.value)
	k = binary.BigEndian.AppendUint64(k, uint64(max(createdAt, 0)))
	return append(k, runID...)
}

// runTerms are the search terms of a run (its initial payload, for a run stored before
// Run.EventName, read only when needed).
func (t *Tx) runTerms(project string, r *Run) []searchTerm {
	wf, app, event := r.Workflow, r.App, r.EventName
	if wf == "" {
		if v := r.Header[LegacyWorkflowHeader]; len(v) == 1 {
			wf = v[0]
			if v := r.Header[LegacyAppHeader]; len(v) == 1 {
				app = v[0]
			}
			if event == "" {
				event = t.initialEventName(project, r.ID)
			}
		}
	}
	var out []searchTerm
	for _, term := range [...]searchTerm{{termWorkflow, wf}, {termApp, app}, {termEvent, event}} {
		if term.value != "" {
			out = append(out, term)
		}
	}
	for _, l := range r.Labels {
		if l != "" {
			out = append(out, searchTerm{termLabel, l})
		}
	}
	return out
}

// initialEventName reads the event name from a native run's initial payload.
func (t *Tx) initialEventName(project, runID string) string {
	var name string
	_ = t.EachHistory(project, runID, 1, func(h HistoryView) error {
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(h.Body, &p) == nil {
			name = p.Name
		}
		return nil
	})
	return name
}

// indexRunTerms writes (put) or removes a run's search entries.
func (t *Tx) indexRunTerms(project string, r *Run, put bool) error {
	terms := t.runTerms(project, r)
	if len(terms) == 0 {
		return nil
	}
	b, err := t.writeBucket(project, bucketRunSearch)
	if err != nil {
		return err
	}
	for _, term := range terms {
		k := termKey(term, r.CreatedAt, r.ID)
		if put {
			err = b.Put(k, nil)
		} else {
			err = b.Delete(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// IndexRunLabels adds search entries for labels a run took after it was indexed (a
// run adopted by its SDK, which set them).
func (t *Tx) IndexRunLabels(project string, r *Run, labels []string) error {
	b, err := t.writeBucket(project, bucketRunSearch)
	if err != nil {
		return err
	}
	for _, l := range labels {
		if l == "" {
			continue
		}
		if err := b.Put(termKey(searchTerm{termLabel, l}, r.CreatedAt, r.ID), nil); err != nil {
			return err
		}
	}
	return nil
}

// RunQuery selects runs by their indexed fields; empty fields select everything. From
// and To bound the creation time (unix ms, both inclusive; 0 leaves a side open).
type RunQuery struct {
	Workflow, App, EventName, Label string
	From, To                        int64
}

func (q RunQuery) terms() []searchTerm {
	var out []searchTerm
	// The most selective first: the walk goes over the first term's entries.
	for _, term := range [...]searchTerm{{termWorkflow, q.Workflow}, {termEvent, q.EventName}, {termLabel, q.Label}, {termApp, q.App}} {
		if term.value != "" {
			out = append(out, term)
		}
	}
	return out
}

// RunSearchKeep decides whether a candidate run matches what the indexes do not
// decide; initial reads its initial payload (nil when it cannot be read).
type RunSearchKeep func(r *Run, initial func() []byte) bool

// SearchRuns returns up to count runs matching q and keep, newest first, after the
// cursor (nil: from the newest). It examines at most examine candidates the indexes
// leave (examine ≤ 0: count): when it stops at that bound, or with a full page, it
// returns the cursor of the last run examined, so a page may hold fewer than count runs
// and still have a cursor to follow.
func (t *Tx) SearchRuns(project string, q RunQuery, after *RunCursor, count, examine int, keep RunSearchKeep) ([]Run, *RunCursor, error) {
	if examine <= 0 {
		examine = count
	}
	terms := q.terms()
	b := t.bucket(project, bucketRunIndex)
	var prefix []byte
	if len(terms) > 0 {
		b = t.bucket(project, bucketRunSearch)
		prefix = termPrefix(terms[0].kind, terms[0].value)
	}
	if b == nil {
		return nil, nil, nil
	}
	idx := t.bucket(project, bucketRunSearch)
	to := q.To
	if to <= 0 || to == math.MaxInt64 {
		to = math.MaxInt64 - 1
	}
	// start is the first key not to return: just after to, or the cursor itself.
	start := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(to+1))
	if after != nil && after.CreatedAt <= to {
		start = append(binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(max(after.CreatedAt, 0))), after.RunID...)
	}
	c := b.Cursor()
	k, _ := c.Seek(start)
	if k == nil {
		k, _ = c.Last()
	}
	for k != nil && bytes.Compare(k, start) >= 0 {
		k, _ = c.Prev()
	}
	var out []Run
	examined := 0
	var last RunCursor
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(k) >= len(prefix)+8; k, _ = c.Prev() {
		created := int64(binary.BigEndian.Uint64(k[len(prefix):]))
		if created < q.From {
			return out, nil, nil
		}
		if len(out) == count || examined == examine {
			return out, &last, nil
		}
		id := string(k[len(prefix)+8:])
		examined++
		last = RunCursor{CreatedAt: created, RunID: id}
		if !hasTerms(idx, terms, created, id) {
			continue
		}
		r, err := t.Run(project, id)
		if err != nil {
			continue // a stale entry: the run was replaced or removed in this transaction
		}
		if r.CreatedAt != created {
			continue // a stale entry of a run id reused by a later run
		}
		initial := func() []byte {
			var body []byte
			_ = t.EachHistory(project, id, 1, func(h HistoryView) error {
				body = bytes.Clone(h.Body)
				return nil
			})
			return body
		}
		if keep == nil || keep(r, initial) {
			out = append(out, *r)
		}
	}
	return out, nil, nil
}

// hasTerms reports whether the run has every term but the first (the walked one).
func hasTerms(idx interface{ Get(key []byte) []byte }, terms []searchTerm, created int64, id string) bool {
	if len(terms) < 2 {
		return true
	}
	if idx == nil {
		return false
	}
	for _, term := range terms[1:] {
		if idx.Get(termKey(term, created, id)) == nil {
			return false
		}
	}
	return true
}

// migrateSearchIndexes builds the search index of every project that has not got it,
// as migrateSweepIndexes does for the sweep's: per project, in transactions of at most
// migrateBatch runs, then a mark. It runs when the store opens, before any other write.
func (s *Store) migrateSearchIndexes() error {
	var projects []string
	err := s.View(func(tx *Tx) error {
		projects = nil
		ids, err := tx.projectIDs()
		for _, p := range ids {
			if meta := tx.bucket(p, bucketMeta); meta == nil || meta.Get([]byte(keySearchIndexes)) == nil {
				projects = append(projects, p)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, p := range projects {
		if err := s.buildSearchIndex(p); err != nil {
			return fmt.Errorf("storage: build the run search index of project %q: %w", p, err)
		}
	}
	return nil
}

// buildSearchIndex indexes every run of project p, migrateBatch per transaction, and
// marks p done.
func (s *Store) buildSearchIndex(p string) error {
	var after []byte
	for {
		var last []byte
		err := s.Update(func(tx *Tx) error {
			last = nil
			b := tx.bucket(p, bucketRuns)
			if b == nil {
				return nil
			}
			// Read a batch first, then write: no write lands under the open cursor.
			var runs []Run
			c := b.Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(runs) < migrateBatch; k, v = c.Next() {
				last = bytes.Clone(k)
				if v == nil {
					continue
				}
				var r Run
				if err := decodeRun(v, &r); err != nil {
					return fmt.Errorf("run %q: %w", k, err)
				}
				runs = append(runs, r)
			}
			for i := range runs {
				if err := tx.indexRunTerms(p, &runs[i], true); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if last == nil {
			break
		}
		after = last
	}
	return s.Update(func(tx *Tx) error {
		meta, err := tx.writeBucket(p, bucketMeta)
		if err != nil {
			return err
		}
		return meta.Put([]byte(keySearchIndexes), []byte{1})
	})
}

// projectIDs lists the ids of the store's projects.
func (t *Tx) projectIDs() ([]string, error) {
	var out []string
	root, err := t.root(bucketProjects)
	if err != nil {
		return nil, err
	}
	err = root.ForEachBucket(func(k []byte) error {
		out = append(out, string(k))
		return nil
	})
	return out, err
}
