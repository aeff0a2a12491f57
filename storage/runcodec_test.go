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

// TestRunFormat1IsRead: format-1 (no flags) and format-2 (no names, error or cancel
// cause) records read as the same run; unknown flags are refused by name.
func TestRunFormat1IsRead(t *testing.T) {
	r := Run{ID: "wfr_1", URL: "http://x/wf", State: RunStarted, CreatedAt: 7, Labels: []string{"a"}}
	data, err := encodeRun(&r)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0}, data[len(data)-6:], "no flags, names, error or cause")
	v2 := append([]byte{runFormat2}, data[1:len(data)-5]...)
	v1 := append([]byte{runFormat1}, data[1:len(data)-6]...)
	for _, old := range [][]byte{v1, v2} {
		var got Run
		require.NoError(t, decodeRun(old, &got))
		require.Equal(t, r, got)
	}

	r.AwaitingSDK = true
	data, err = encodeRun(&r)
	require.NoError(t, err)
	got := Run{}
	require.NoError(t, decodeRun(data, &got))
	require.True(t, got.AwaitingSDK)
	data[len(data)-6] = 0x04
	require.ErrorContains(t, decodeRun(data, &Run{}), "unknown run flags")
}

// TestRunRecordsOfBothFormatsAreRead: a JSON run of an earlier version reads through
// the store, with its cursor; new runs are written in format 3; an unknown format is
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
		require.Equal(t, byte(runFormat3), tx.bucket("p", bucketRuns).Get([]byte("wfr_new"))[0])
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
