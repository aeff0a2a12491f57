package storage

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunCodecRoundTripsEveryField: a run with every field set (nested records too)
// comes back equal, except the cursor fields, which live in the cursor record. A field
// added to Run and not to the codec fails here.
func TestRunCodecRoundTripsEveryField(t *testing.T) {
	var r Run
	seed := 0
	fillAll(t, reflect.ValueOf(&r).Elem(), &seed)
	r.Parent.Step = []byte(`{"stepId":1}`)
	data, err := encodeRun(&r)
	require.NoError(t, err)
	var got Run
	require.NoError(t, decodeRun(data, &got))
	r.HistoryLen, r.HistoryBytes = 0, 0
	require.Equal(t, r, got)

	for n := 1; n < len(data); n++ {
		require.Error(t, decodeRun(data[:n], &Run{}), "prefix of %d bytes", n)
	}
}

// TestRunFormat1IsRead: a format-1 record (format 2 without the flags) reads as the same
// run with no flags; unknown flags are refused by name; the extension (error, who
// cancelled) and a native run's names round-trip.
func TestRunFormat1IsRead(t *testing.T) {
	r := Run{ID: "wfr_1", URL: "http://x/wf", State: RunStarted, CreatedAt: 7, Labels: []string{"a"}}
	data, err := encodeRun(&r)
	require.NoError(t, err)
	require.Equal(t, byte(0), data[len(data)-1], "no flags")
	v1 := append([]byte{runFormat1}, data[1:len(data)-1]...)
	var got Run
	require.NoError(t, decodeRun(v1, &got))
	require.Equal(t, r, got)

	r.AwaitingSDK = true
	data, err = encodeRun(&r)
	require.NoError(t, err)
	got = Run{}
	require.NoError(t, decodeRun(data, &got))
	require.True(t, got.AwaitingSDK)
	data[len(data)-1] = 0x08
	require.ErrorContains(t, decodeRun(data, &Run{}), "unknown run flags")

	r.Workflow, r.App, r.EventName = "wf", "app", "e.x"
	r.Error = &RunError{Code: ErrCodeRetriesExhausted, Message: "endpoint answered 500", Status: 500}
	r.CancelledBy = &CancelledBy{Singleton: "wfr_2"}
	data, err = encodeRun(&r)
	require.NoError(t, err)
	got = Run{}
	require.NoError(t, decodeRun(data, &got))
	require.Equal(t, r, got)
}

// TestRunRecordsOfBothFormatsAreRead: a JSON run of an earlier version reads through
// the store, with its cursor; new runs are written in format 2; an unknown format is
// refused by name.
func TestRunRecordsOfBothFormatsAreRead(t *testing.T) {
	s := openTestStore(t)
	old := Run{ID: "wfr_old", URL: "http://x/wf", CreatedAt: 5, State: RunStarted, Retries: 2,
		Header: map[string][]string{"A": {"b"}}, Labels: []string{"l"}, HistoryLen: 3, HistoryBytes: 30}
	oldJSON, err := json.Marshal(old)
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *Tx) error {
		b, err := tx.writeBucket("p", bucketRuns)
		if err != nil {
			return err
		}
		if err := b.Put([]byte("wfr_old"), oldJSON); err != nil {
			return err
		}
		if err := tx.PutRunCursor("p", &old); err != nil {
			return err
		}
		fresh := old
		fresh.ID = "wfr_new"
		if err := tx.PutRun("p", &fresh); err != nil {
			return err
		}
		return b.Put([]byte("wfr_future"), []byte{0x09})
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		got, err := tx.Run("p", "wfr_old")
		require.NoError(t, err)
		require.Equal(t, old, *got)
		got, err = tx.Run("p", "wfr_new")
		require.NoError(t, err)
		want := old
		want.ID = "wfr_new"
		require.Equal(t, want, *got)
		require.Equal(t, byte(runFormat2), tx.bucket("p", bucketRuns).Get([]byte("wfr_new"))[0])
		_, err = tx.Run("p", "wfr_future")
		require.ErrorContains(t, err, "unknown format 0x09")
		return nil
	}))
}

// BenchmarkRunCodec compares the format-1 run record with the JSON one it replaced.
func BenchmarkRunCodec(b *testing.B) {
	r := &Run{ID: "wfr_bench_1", URL: "http://127.0.0.1:41234/wf", CreatedAt: 1764523380000, State: RunStarted,
		Retries: 3, Header: map[string][]string{"X-User": {"a"}}, CallerIP: "127.0.0.1"}
	bin, _ := encodeRun(r)
	js, _ := json.Marshal(r)
	b.Run("DecodeBinary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out Run
			_ = decodeRun(bin, &out)
		}
	})
	b.Run("DecodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out Run
			_ = decodeRun(js, &out)
		}
	})
	b.Run("EncodeBinary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = encodeRun(r)
		}
	})
	b.Run("EncodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}

// TestRunCodecAllocationBudget: decoding the run a step publish reads stays cheap.
func TestRunCodecAllocationBudget(t *testing.T) {
	r := &Run{ID: "wfr_bench_1", URL: "http://127.0.0.1:41234/wf", CreatedAt: 1764523380000, State: RunStarted,
		Retries: 3, Header: map[string][]string{"X-User": {"a"}}, CallerIP: "127.0.0.1"}
	bin, err := encodeRun(r)
	require.NoError(t, err)
	dec := testing.AllocsPerRun(100, func() {
		var out Run
		_ = decodeRun(bin, &out)
	})
	require.LessOrEqual(t, dec, 5.0) // run, strings, header map (2), its value slice
	enc := testing.AllocsPerRun(100, func() { _, _ = encodeRun(r) })
	require.LessOrEqual(t, enc, 1.0)
}
