package delivery

import (
	"errors"
	"net/url"

	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/storage"
)

// logSendError keeps for the operator what the tenant is not told (describeSendError):
// a refused destination at warn level with the address and the range it fell in, other
// failures to connect at debug level.
func (e *Engine) logSendError(m *storage.Message, err error) {
	host := ""
	if u, perr := url.Parse(m.URL); perr == nil {
		host = u.Host
	}
	var blocked *netguard.BlockedError
	if errors.As(err, &blocked) {
		e.log.Warn("delivery refused: destination address not allowed", "project", m.Project, "message_id", m.ID,
			"host", host, "addr", blocked.Addr.String(), "range", blocked.Range.String(), "reason", blocked.What)
		return
	}
	e.log.Debug("delivery attempt failed", "project", m.Project, "message_id", m.ID, "host", host, "err", err)
}
