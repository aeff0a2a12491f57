package walkv

import "errors"

// Crash stops the engine the way a killed process leaves it on disk, for the crash and
// recovery tests here and of the store above it: what was committed is in bbolt or in
// the log, the log is not checkpointed by a final Close and not deleted. A checkpoint in
// progress is first let finish (a process killed during one is the same as one killed
// before it started, or after it committed: tests build those states from copies of the
// files). The engine is unusable afterwards (Update returns kv.ErrClosed, Close does
// nothing).
func (e *Engine) Crash() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	// No freeze can start under writeMu, so ckptDone is the last checkpoint's.
	e.mu.Lock()
	done := e.ckptDone
	e.mu.Unlock()
	<-done
	close(e.ckptReq)
	<-e.loopDone
	return errors.Join(e.seg.Close(), e.db.Close())
}
