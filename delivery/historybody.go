package delivery

import (
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// historyBodyTx builds a step delivery's body, the first n entries of a run's history as
// the JSON array of docs/protocol.md, "Workflow runs", straight from the stored records:
// the same bytes historyBody writes, without decoding the entries into structs, copying
// their bodies or encoding through reflection (it was the largest part of reading a
// delivery).
func historyBodyTx(tx *storage.Tx, project, runID string, n int) ([]byte, error) {
	buf := make([]byte, 0, 128*n+2)
	buf = append(buf, '[')
	i := 0
	err := tx.EachHistory(project, runID, n, func(h storage.HistoryView) error {
		if i > 0 {
			buf = append(buf, ',')
		}
		i++
		buf = wire.AppendHistoryEntry(buf, h.MessageID, h.Body, h.CallType)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(buf, ']'), nil
}
