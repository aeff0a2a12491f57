package pg

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// leaseChannel is the NOTIFY channel Resign, a replica's first Heartbeat and Leave
// signal on.
const leaseChannel = "duraton_lease"

// WatchLease returns a channel that receives a value (coalesced: it never blocks the
// watcher) soon after a shard's leader resigns or a replica joins or leaves. It is a
// wake-up hint only: replicas still poll, and a notification lost while the watch
// reconnects costs at most one poll.
// The watch holds its own connection, outside the pool, until ctx ends.
func (e *Engine) WatchLease(ctx context.Context, log *slog.Logger) <-chan struct{} {
	wake := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			err := e.listen(ctx, wake)
			if ctx.Err() != nil {
				return
			}
			log.Warn("watch the leader lease (LISTEN); polling only until it reconnects", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return wake
}

// listen runs one LISTEN connection until it fails or ctx ends.
func (e *Engine) listen(ctx context.Context, wake chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx) // a listening connection has nothing to lose
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+leaseChannel); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		select {
		case wake <- struct{}{}:
		default: // one wake-up is pending already
		}
	}
}
