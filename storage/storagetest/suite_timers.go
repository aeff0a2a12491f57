package storagetest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

var timerTests = map[string]func(*testing.T, *storage.Store){
	// Delayed events and cron fires share one index by due time: found earliest first at
	// or before now, at most limit; a cron trigger has one pending fire (a put replaces
	// it); a fired timer is gone; a workflow's fires go with it; a pending delayed event
	// survives the retention sweep.
	"Index": func(t *testing.T, s *storage.Store) {
		now := base.UnixMilli()
		ev := func(id string, at int64) *storage.Event {
			return &storage.Event{ID: storage.PrefixEvent + id, Name: "e", Data: json.RawMessage(`{}`), Ts: at, ScheduledFor: at, Pending: true, Runs: []storage.EventRun{}}
		}
		update(t, s, func(tx *storage.Tx) error {
			for _, e := range []*storage.Event{ev("000000000000000000000001", now+300), ev("000000000000000000000002", now+100)} {
				if err := tx.PutDelayedEvent(projectP, e); err != nil {
					return err
				}
			}
			if err := tx.PutCronTimer(projectP, &storage.CronTimer{Workflow: "wf", Trigger: 0, Cron: "* * * * *", At: now + 50}); err != nil {
				return err
			}
			// The trigger's next fire replaces its pending one.
			if err := tx.PutCronTimer(projectP, &storage.CronTimer{Workflow: "wf", Trigger: 0, Cron: "* * * * *", At: now + 200}); err != nil {
				return err
			}
			return tx.PutCronTimer(projectP, &storage.CronTimer{Workflow: "wf", Trigger: 2, Cron: "0 * * * *", TZ: "UTC", At: now + 400})
		})
		view(t, s, func(tx *storage.Tx) error {
			due, err := tx.DueNativeTimers(projectP, now+300, 10)
			require.NoError(t, err)
			require.Len(t, due, 3)
			require.Equal(t, now+100, due[0].At)
			require.Equal(t, storage.PrefixEvent+"000000000000000000000002", due[0].Event.ID)
			require.Equal(t, &storage.CronTimer{Workflow: "wf", Trigger: 0, Cron: "* * * * *", At: now + 200}, due[1].Cron)
			require.Equal(t, now+300, due[2].Event.ScheduledFor)
			due, err = tx.DueNativeTimers(projectP, now+300, 1)
			require.NoError(t, err)
			require.Len(t, due, 1, "at most limit")
			next, ok := tx.NextNativeTimer(projectP)
			require.True(t, ok)
			require.Equal(t, now+100, next)
			c, err := tx.CronTimerOf(projectP, "wf", 2)
			require.NoError(t, err)
			require.Equal(t, "UTC", c.TZ)
			_, err = tx.CronTimerOf(projectP, "wf", 1)
			require.ErrorIs(t, err, storage.ErrNotFound)
			e, err := tx.Event(projectP, storage.PrefixEvent+"000000000000000000000001")
			require.NoError(t, err, "a delayed event is listed at once")
			require.True(t, e.Pending)
			return nil
		})
		update(t, s, func(tx *storage.Tx) error {
			due, err := tx.DueNativeTimers(projectP, now+200, 10)
			if err != nil {
				return err
			}
			for _, nt := range due {
				if err := tx.DeleteNativeTimer(projectP, nt); err != nil {
					return err
				}
			}
			n, err := tx.DeleteEventsBefore(projectP, storage.PrefixEvent+"fff", 10)
			require.Equal(t, 0, n, "pending delayed events are not swept")
			return err
		})
		view(t, s, func(tx *storage.Tx) error {
			due, err := tx.DueNativeTimers(projectP, now+1000, 10)
			require.NoError(t, err)
			require.Len(t, due, 2)
			require.NotNil(t, due[0].Event)
			require.Equal(t, 2, due[1].Cron.Trigger)
			_, err = tx.CronTimerOf(projectP, "wf", 0)
			require.ErrorIs(t, err, storage.ErrNotFound, "fired")
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteCronTimers(projectP, "wf") })
		view(t, s, func(tx *storage.Tx) error {
			due, err := tx.DueNativeTimers(projectP, now+1000, 10)
			require.NoError(t, err)
			require.Len(t, due, 1, "the workflow's fires are gone, the delayed event stays")
			require.NotNil(t, due[0].Event)
			return nil
		})
	},
}
