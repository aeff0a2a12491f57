package storage

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
)

// fillAll sets every field of the value v points at to a non-zero value, recursing into
// pointers to structs, so a round trip through a codec that forgets a field fails.
func fillAll(t *testing.T, v reflect.Value, seed *int) {
	t.Helper()
	*seed++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*seed%26)) + "é\x00" + time.Duration(*seed).String())
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*seed) * -1_000_003)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float64:
		v.SetFloat(float64(*seed) * 1.25)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte{0, 1, 2, byte(*seed), 255})
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillAll(t, s.Index(i), seed)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillAll(t, k, seed)
			fillAll(t, e, seed)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillAll(t, p.Elem(), seed)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			fillAll(t, v.Field(i), seed)
		}
	default:
		t.Fatalf("fillAll: no rule for %s", v.Type())
	}
}

// TestMessageCodecRoundTripsEveryField: a message with every field (and every field of
// its nested records) set comes back equal. A field added to Message and not to the
// codec fails here.
func TestMessageCodecRoundTripsEveryField(t *testing.T) {
	var m Message
	seed := 0
	fillAll(t, reflect.ValueOf(&m).Elem(), &seed)
	data, err := encodeMessage(nil, &m)
	require.NoError(t, err)
	require.Equal(t, byte(msgFormat1), data[0])
	var got Message
	require.NoError(t, decodeMessage(data, &got))
	require.Equal(t, m, got)

	// Zero values stay zero (nil, not empty, like the JSON records had them).
	data, err = encodeMessage(nil, &Message{ID: "m"})
	require.NoError(t, err)
	got = Message{}
	require.NoError(t, decodeMessage(data, &got))
	require.Equal(t, Message{ID: "m"}, got)
}

// TestMessageRecordsOfBothFormatsAreRead: a message record written as JSON by an older
// version is read through the store; a new one is written in format 1; a record of an
// unknown format is refused with an error naming it; a truncated one with an error,
// never a panic.
func TestMessageRecordsOfBothFormatsAreRead(t *testing.T) {
	s := openTestStore(t)
	old := Message{ID: "msg_old", Project: "p", URL: "http://x/y", Method: "POST", Body: []byte("hi"),
		Header: map[string][]string{"A": {"1"}}, DueAt: 42, Retries: 3, FlowControl: &flowctl.Config{Key: "k", Parallelism: 2}}
	oldJSON, err := json.Marshal(old)
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *Tx) error {
		b, err := tx.writeBucket("p", bucketMessages)
		if err != nil {
			return err
		}
		if err := b.Put([]byte("msg_old"), oldJSON); err != nil {
			return err
		}
		if err := b.Put([]byte("msg_future"), []byte{0x02, 0, 0}); err != nil {
			return err
		}
		fresh := old
		fresh.ID = "msg_new"
		return tx.PutMessage(&fresh)
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		got, err := tx.Message("p", "msg_old")
		require.NoError(t, err)
		require.Equal(t, old, *got)
		got, err = tx.Message("p", "msg_new")
		require.NoError(t, err)
		require.Equal(t, "msg_new", got.ID)
		require.Equal(t, old.Body, got.Body)
		raw := tx.bucket("p", bucketMessages).Get([]byte("msg_new"))
		require.Equal(t, byte(msgFormat1), raw[0], "new records are written in format 1")
		_, err = tx.Message("p", "msg_future")
		require.ErrorIs(t, err, errMsgFormat)
		require.ErrorContains(t, err, "unknown format 0x02")
		return nil
	}))

	full := Message{}
	seed := 0
	fillAll(t, reflect.ValueOf(&full).Elem(), &seed)
	data, err := encodeMessage(nil, &full)
	require.NoError(t, err)
	for n := 1; n < len(data); n++ {
		var m Message
		require.Error(t, decodeMessage(data[:n], &m), "prefix of %d bytes", n)
	}
}

// benchMessage is a typical workflow step message.
func benchMessage() *Message {
	return &Message{ID: "msg_2hbE4v0kq9Qw3v8mYc1Xx7aZ", Project: "default", Kind: KindMessage,
		URL: "http://127.0.0.1:41234/wf", Method: "POST", Body: []byte(`{"stepId":2,"stepName":"s1","stepType":"Run","out":"1","concurrent":1}`),
		Header: map[string][]string{"Content-Type": {"application/json"}, "Upstash-Workflow-Runid": {"wfr_bench_1"},
			"Upstash-Workflow-Url": {"http://127.0.0.1:41234/wf"}, "Upstash-Workflow-Createdat": {"1764523380000"}},
		CreatedAt: 1764523380000, OrderAt: 1764523380000, NotBefore: 1764523380000, DueAt: 1764523380000000000,
		State: StateCreated, Retries: 3, RunID: "wfr_bench_1", CallType: "step", HistoryLen: 3}
}

// BenchmarkMessageCodec compares the format-1 record with the JSON one it replaced.
func BenchmarkMessageCodec(b *testing.B) {
	m := benchMessage()
	bin, _ := encodeMessage(nil, m)
	js, _ := json.Marshal(m)
	b.Run("EncodeBinary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = encodeMessage(make([]byte, 0, messageSizeHint(m)), m)
		}
	})
	b.Run("EncodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(m)
		}
	})
	b.Run("DecodeBinary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out Message
			_ = decodeMessage(bin, &out)
		}
	})
	b.Run("DecodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out Message
			_ = decodeMessage(js, &out)
		}
	})
}

// TestMessageCodecAllocationBudget keeps the hot record's encoding cheap: a later change
// that adds allocations per message fails here.
func TestMessageCodecAllocationBudget(t *testing.T) {
	m := benchMessage()
	bin, err := encodeMessage(nil, m)
	require.NoError(t, err)
	enc := testing.AllocsPerRun(100, func() { _, _ = encodeMessage(make([]byte, 0, messageSizeHint(m)), m) })
	require.LessOrEqual(t, enc, 1.0, "encode allocations")
	dec := testing.AllocsPerRun(100, func() {
		var out Message
		_ = decodeMessage(bin, &out)
	})
	// the message, its body, the strings' one copy, the header map (2) and its four
	// value slices; JSON took 35
	require.LessOrEqual(t, dec, 9.0, "decode allocations")
}

// TestHistoryRecordsOfBothFormatsAreRead: a JSON history entry of an earlier version and
// a format-1 one read the same; an unknown format is refused; empty bodies read as
// empty, not nil.
func TestHistoryRecordsOfBothFormatsAreRead(t *testing.T) {
	s := openTestStore(t)
	old := HistoryEntry{MessageID: "msg_0", Body: []byte(`"init"`), CallType: CallStep, CreatedAt: 7}
	oldJSON, err := json.Marshal(old)
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *Tx) error {
		b, err := tx.writeBucket("p", bucketRunData)
		if err != nil {
			return err
		}
		if err := b.Put(historyKey("wfr", 0), oldJSON); err != nil {
			return err
		}
		if err := tx.PutHistory("p", "wfr", 1, &HistoryEntry{MessageID: "msg_1", Body: []byte{0, 255}, CallType: CallFromCallback, CreatedAt: -3}); err != nil {
			return err
		}
		if err := tx.PutHistory("p", "wfr", 2, &HistoryEntry{MessageID: "msg_2", CallType: CallStep}); err != nil {
			return err
		}
		return b.Put(historyKey("future", 0), []byte{0x07, 1, 2})
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		h, err := tx.History("p", "wfr", 10)
		require.NoError(t, err)
		require.Equal(t, []HistoryEntry{old,
			{MessageID: "msg_1", Body: []byte{0, 255}, CallType: CallFromCallback, CreatedAt: -3},
			{MessageID: "msg_2", Body: []byte{}, CallType: CallStep}}, h)
		require.Equal(t, byte(histFormat1), tx.bucket("p", bucketRunData).Get(historyKey("wfr", 1))[0])
		_, err = tx.History("p", "future", 1)
		require.ErrorContains(t, err, "unknown format")
		return nil
	}))
}

// TestHistoryCodecRoundTripsEveryField: a history entry with every field set comes back
// equal through PutHistory and History. A field added to HistoryEntry and not to the
// codec fails here.
func TestHistoryCodecRoundTripsEveryField(t *testing.T) {
	s := openTestStore(t)
	var e HistoryEntry
	seed := 0
	fillAll(t, reflect.ValueOf(&e).Elem(), &seed)
	require.NoError(t, s.Update(func(tx *Tx) error { return tx.PutHistory("p", "wfr", 0, &e) }))
	require.NoError(t, s.View(func(tx *Tx) error {
		h, err := tx.History("p", "wfr", 1)
		require.NoError(t, err)
		require.Equal(t, []HistoryEntry{e}, h)
		return nil
	}))
	data, err := encodeHistory(&e)
	require.NoError(t, err)
	bodyAt := len(data) - len(e.Body)
	for n := 1; n < bodyAt; n++ {
		_, err := viewHistory(data[:n])
		require.Error(t, err, "prefix of %d bytes", n)
	}
}
