package storage

const bucketSchedules = "schedules"

// Schedule is a QStash schedule: a message template published on every tick of a cron
// expression. NextAt is durable and moves forward in the same transaction that publishes
// a tick's message, so a restart neither repeats a tick nor loses one (missed ticks fire
// once, late). Times are unix milliseconds.
type Schedule struct {
	ID        string `json:"id"`
	Project   string `json:"project"`
	Cron      string `json:"cron"`
	CreatedAt int64  `json:"createdAt"`
	Paused    bool   `json:"paused"`
	// Template is the message each tick publishes (ID, times and state unset).
	Template Message `json:"template"`
	// DelayMs delays each tick's message after its publication.
	DelayMs int64 `json:"delayMs,omitempty"`
	// NextAt is the next tick to fire; 0 while paused.
	NextAt int64 `json:"nextAt"`
	// LastAt is when the last tick fired (0: never), LastMessageID what it published.
	LastAt        int64  `json:"lastAt,omitempty"`
	LastMessageID string `json:"lastMessageId,omitempty"`
}

// PutSchedule creates or replaces a schedule.
func (t *Tx) PutSchedule(s *Schedule) error {
	return t.putRecord(s.Project, bucketSchedules, s.ID, s)
}

// Schedule reads a schedule.
func (t *Tx) Schedule(project, id string) (*Schedule, error) {
	return getRecord[Schedule](t.bucket(project, bucketSchedules), id)
}

// DeleteSchedule removes a schedule; ErrNotFound when absent.
func (t *Tx) DeleteSchedule(project, id string) error {
	return deleteRecord(t.bucket(project, bucketSchedules), id)
}

// ScheduleCount is the number of a project's schedules.
func (t *Tx) ScheduleCount(project string) int {
	return countRecords(t.bucket(project, bucketSchedules))
}

// Schedules lists a project's schedules by id.
func (t *Tx) Schedules(project string) ([]Schedule, error) {
	return listRecords[Schedule](t.bucket(project, bucketSchedules), "schedule")
}
