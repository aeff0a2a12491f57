// Package schedule runs QStash schedules: a message template published on every tick of
// a cron expression (`Upstash-Cron`, five fields, optional `CRON_TZ=` or `TZ=` prefix,
// parsed by robfig/cron/v3).
//
// Durability: a schedule's next tick (storage.Schedule.NextAt) is stored, and it moves
// forward in the same transaction that publishes the tick's message
// (delivery.Engine.PublishAllWith), compare-and-set on the tick it expected. So a crash
// or restart never fires one tick twice, and never loses one either: ticks that fell
// while the server was down fire once, late, at start-up, and the next tick is computed
// from then (not one message per missed tick).
//
// Wall-clock rules under a time zone: a tick whose local time does not exist (the hour
// skipped when daylight saving starts) is skipped that day, as robfig/cron computes it; a
// local time that happens twice (the hour repeated when it ends) fires once, at its first
// occurrence.
//
// Lifecycle: New, Start(ctx) loads every project's active schedules and starts the loop;
// Stop ends it and waits. The loop sleeps until the earliest next tick; a change through
// the management methods wakes it. Time comes from Config.Now and the runtime's timers,
// so tests drive it with testing/synctest.
//
// It imports delivery (publication), storage (the Schedule record) and robfig/cron/v3.
// It never imports server.
package schedule
