package schedule

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

func TestPauseResumeDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := openStore(t, t.TempDir())
		defer store.Close()
		ep := &endpoint{}
		s := start(t, store, ep)
		defer s.stop()
		id := every(t, s, "*/2 * * * *")

		time.Sleep(2*time.Minute + time.Second) // 00:02 fires
		synctest.Wait()
		require.Len(t, ep.got(), 1)
		require.NoError(t, s.sched.SetPaused(t.Context(), project, id, true))
		sc, err := s.sched.Get(t.Context(), project, id)
		require.NoError(t, err)
		require.True(t, sc.Paused)
		time.Sleep(5 * time.Minute) // 00:04 and 00:06 fall while paused
		synctest.Wait()
		require.Len(t, ep.got(), 1, "a paused schedule fires nothing")

		require.NoError(t, s.sched.SetPaused(t.Context(), project, id, false)) // at 00:07:01
		synctest.Wait()
		require.Len(t, ep.got(), 1, "resuming does not fire the ticks that fell while paused")
		time.Sleep(time.Minute) // 00:08 fires
		synctest.Wait()
		require.Len(t, ep.got(), 2)

		require.NoError(t, s.sched.Delete(t.Context(), project, id))
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		require.Len(t, ep.got(), 2, "a deleted schedule fires nothing")
		_, err = s.sched.Get(t.Context(), project, id)
		require.ErrorIs(t, err, ErrNotFound)
		require.ErrorIs(t, s.sched.Delete(t.Context(), project, id), ErrNotFound)
		require.ErrorIs(t, s.sched.SetPaused(t.Context(), project, id, true), ErrNotFound)
	})
}

func TestCreateValidatesAndLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := openStore(t, t.TempDir())
		defer store.Close()
		e, err := delivery.New(delivery.Config{Transport: &endpoint{}}, store)
		require.NoError(t, err)
		s := New(Config{MaxPerProject: 2}, store, e)
		tmpl := delivery.Message{URL: "http://x.test/a", Method: "POST"}
		for _, bad := range []string{"", "* * * *", "61 * * * *", "@every 30s", "CRON_TZ=Nowhere/City * * * * *", "0 0 * * * *",
			"0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6 *", "CRON_TZ=Europe/Berlin 0 0 30 2 *"} {
			_, err := s.Create(t.Context(), Spec{Project: project, Cron: bad, Template: tmpl})
			require.ErrorIs(t, err, ErrBadCron, "%q", bad)
		}
		_, err = s.Create(t.Context(), Spec{Project: project, ID: "has space", Cron: "* * * * *", Template: tmpl})
		require.ErrorIs(t, err, ErrBadID)

		id, err := s.Create(t.Context(), Spec{Project: project, ID: "mine", Cron: "@hourly", Template: tmpl})
		require.NoError(t, err)
		require.Equal(t, "mine", id)
		first, err := s.Get(t.Context(), project, "mine")
		require.NoError(t, err)
		time.Sleep(time.Second)
		_, err = s.Create(t.Context(), Spec{Project: project, ID: "mine", Cron: "@every 2m", Template: tmpl})
		require.NoError(t, err, "an existing id is replaced")
		again, err := s.Get(t.Context(), project, "mine")
		require.NoError(t, err)
		require.Equal(t, "@every 2m", again.Cron)
		require.Equal(t, first.CreatedAt, again.CreatedAt)

		gen, err := s.Create(t.Context(), Spec{Project: project, Cron: "@daily", Template: tmpl})
		require.NoError(t, err)
		require.Regexp(t, `^scd_[A-Z2-7]{26}$`, gen)
		_, err = s.Create(t.Context(), Spec{Project: project, Cron: "@daily", Template: tmpl})
		require.ErrorIs(t, err, ErrLimit)
		list, err := s.List(t.Context(), project)
		require.NoError(t, err)
		require.Len(t, list, 2)
	})
}

// TestRareDatesAreAccepted: a date that occurs only some years is a valid schedule whose
// next tick is that date, not a date that never occurs.
func TestRareDatesAreAccepted(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"0 0 29 2 *", "2028-02-29"},
		{"0 0 31 1,4 *", "2027-01-31"},
		{"0 0 30 2 1", "2027-02-01"}, // day of month or day of week: Mondays
	} {
		s, err := ParseCron(c.expr)
		require.NoError(t, err, c.expr)
		next := s.Next(time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC))
		require.Equal(t, c.want, next.Format(time.DateOnly), c.expr)
	}
}
