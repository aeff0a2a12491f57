package storage

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLogCodecRoundTripsEveryField: a log event with every field set comes back equal; a
// field added to LogEvent and not to the codec fails here.
func TestLogCodecRoundTripsEveryField(t *testing.T) {
	var ev LogEvent
	seed := 0
	fillAll(t, reflect.ValueOf(&ev).Elem(), &seed)
	data := encodeLogEvent(nil, &ev)
	require.Equal(t, byte(logFormat1), data[0])
	var got LogEvent
	require.NoError(t, decodeLogEvent(data, &got))
	require.Equal(t, ev, got)

	// Zero values stay zero (nil, not empty, as the JSON records had them).
	got = LogEvent{}
	require.NoError(t, decodeLogEvent(encodeLogEvent(nil, &LogEvent{ID: "log_1"}), &got))
	require.Equal(t, LogEvent{ID: "log_1"}, got)

	for n := 1; n < len(data); n++ {
		var e LogEvent
		require.Error(t, decodeLogEvent(data[:n], &e), "prefix of %d bytes", n)
	}
}

// TestLogRecordsOfBothFormatsAreRead: events written as JSON by an older version and new
// format-1 ones are listed together, newest first; a record of an unknown format is
// refused with an error naming it.
func TestLogRecordsOfBothFormatsAreRead(t *testing.T) {
	s := openTestStore(t)
	old := LogEvent{ID: "log_01", Time: 7, State: StateCreated, MessageID: "msg_a", URL: "http://x/y", Labels: []string{"l"},
		ResponseStatus: 500, ResponseHeader: map[string][]string{"A": {"1"}}, ResponseBody: []byte("no"), Retried: 1}
	oldJSON, err := json.Marshal(old)
	require.NoError(t, err)
	fresh := old
	fresh.ID, fresh.State, fresh.Error = "log_02", StateDelivered, "e"
	require.NoError(t, s.Update(func(tx *Tx) error {
		b, err := tx.writeBucket("p", bucketLogs)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(old.ID), oldJSON); err != nil {
			return err
		}
		return tx.AppendLog("p", &fresh)
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		require.Equal(t, byte(logFormat1), tx.bucket("p", bucketLogs).Get([]byte("log_02"))[0], "new records are written in format 1")
		got, next, err := tx.ListLogs("p", "", 10, 0, func(*LogEvent) bool { return true })
		require.NoError(t, err)
		require.Empty(t, next)
		require.Equal(t, []LogEvent{fresh, old}, got)
		return nil
	}))
	require.NoError(t, s.Update(func(tx *Tx) error {
		b, err := tx.writeBucket("p", bucketLogs)
		if err != nil {
			return err
		}
		return b.Put([]byte("log_03"), []byte{0x02, 0, 0})
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		_, _, err := tx.ListLogs("p", "", 10, 0, func(*LogEvent) bool { return true })
		require.ErrorIs(t, err, errLogFormat)
		require.ErrorContains(t, err, "unknown format 0x02")
		return nil
	}))
}

// benchLogEvent is the event a workflow step's delivery writes.
func benchLogEvent() *LogEvent {
	return &LogEvent{ID: "log_2hbE4v0kq9Qw3v8mYc1Xx7aZ", Time: 1764523380000, State: StateDelivered,
		MessageID: "msg_2hbE4v0kq9Qw3v8mYc1Xx7aZ", URL: "http://127.0.0.1:41234/wf", ResponseStatus: 200,
		ResponseBody: []byte(`{"workflowRunId":"wfr_bench_0","finishCondition":"success"}`)}
}

// TestLogCodecAllocationBudget: encoding into a sized buffer allocates nothing; decoding
// allocates the event, the body copy and the one string all fields share (JSON: 10).
func TestLogCodecAllocationBudget(t *testing.T) {
	ev := benchLogEvent()
	buf := make([]byte, 0, logEventSizeHint(ev))
	require.LessOrEqual(t, len(encodeLogEvent(nil, ev)), cap(buf), "the size hint covers the record")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = encodeLogEvent(buf[:0], ev) }))
	data := encodeLogEvent(nil, ev)
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() {
		var got LogEvent
		_ = decodeLogEvent(data, &got)
	}), 3.0)
}

func BenchmarkLogCodec(b *testing.B) {
	ev := benchLogEvent()
	b.Run("EncodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(ev)
		}
	})
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodeLogEvent(make([]byte, 0, logEventSizeHint(ev)), ev)
		}
	})
	js, _ := json.Marshal(ev)
	bin := encodeLogEvent(nil, ev)
	b.Run("DecodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got LogEvent
			_ = json.Unmarshal(js, &got)
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got LogEvent
			_ = decodeLogEvent(bin, &got)
		}
	})
}
