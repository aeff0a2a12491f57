package storage

// RunRef names a run a write changed: its record, its history or its cursor.
type RunRef struct {
	Project, ID string
}

// UpdateRuns is Update that also returns the runs fn changed (PutRun, PutRunCursor,
// PutHistory, DeleteRun), for notifications after the commit: the list is the one of
// the run of fn that committed, so a function run twice by the group committer is
// reported once. Update itself records nothing.
func (s *Store) UpdateRuns(fn func(*Tx) error) ([]RunRef, error) {
	o := &op{fn: fn, done: make(chan error, 1), track: true}
	err := s.enqueue(o)
	if err != nil {
		return nil, err
	}
	return o.runs, nil
}

// noteRun records that the running function changed a run, when its caller asked.
func (t *Tx) noteRun(project, id string) {
	if !t.track {
		return
	}
	for _, r := range t.runs { // PutRun writes the cursor too; a step, history and cursor
		if r.ID == id && r.Project == project {
			return
		}
	}
	t.runs = append(t.runs, RunRef{Project: project, ID: id})
}

// beginOp prepares tx for running o: a fresh list of changed runs when o asked for one.
func (t *Tx) beginOp(o *op) {
	t.track, t.runs = o.track, nil
}
