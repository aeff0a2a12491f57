package expr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// FromJSON decodes JSON text into the values programs take: objects as map[string]any,
// arrays as []any, integers that fit as int64, other numbers as float64.
func FromJSON(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(t), 64)
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = numbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = numbers(e)
		}
	}
	return v
}

// Event is an event as programs see it: {name, data, id, ts}.
func Event(id, name string, data json.RawMessage, ts int64) (map[string]any, error) {
	d, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("event data: %w", err)
	}
	return map[string]any{"id": id, "name": name, "data": d, "ts": ts}, nil
}

// Render writes a value as JSON text: an object's keys sorted, a whole double without
// a fraction. A string at the top is written without quotes unless quoted is set (so
// "o1" and 1 render as o1 and 1, or "o1" and 1). Null, NaN, infinities and evaluation
// errors have no text: null is ErrNoValue.
func Render(v ref.Val, quoted bool) (string, error) {
	if s, ok := v.(types.String); ok && !quoted {
		return string(s), nil
	}
	var b bytes.Buffer
	if err := render(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// maxDepth bounds the nesting Render follows.
const maxDepth = 64

func render(b *bytes.Buffer, v ref.Val, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("the value nests deeper than %d", maxDepth)
	}
	switch t := v.(type) {
	case types.Null:
		if depth == 0 {
			return ErrNoValue
		}
		b.WriteString("null")
	case types.String:
		s, _ := json.Marshal(string(t))
		b.Write(s)
	case types.Bool:
		b.WriteString(strconv.FormatBool(bool(t)))
	case types.Int:
		b.WriteString(strconv.FormatInt(int64(t), 10))
	case types.Uint:
		b.WriteString(strconv.FormatUint(uint64(t), 10))
	case types.Double:
		f := float64(t)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("the value %v has no JSON text", f)
		}
		s, _ := json.Marshal(f)
		b.Write(s)
	case types.Bytes:
		s, _ := json.Marshal(base64.StdEncoding.EncodeToString(t))
		b.Write(s)
	case types.Timestamp:
		s, _ := json.Marshal(t.Time.UTC().Format(time.RFC3339Nano))
		b.Write(s)
	case types.Duration:
		s, _ := json.Marshal(t.Duration.String())
		b.Write(s)
	case *types.Err:
		return t
	case traits.Mapper:
		return renderMap(b, t, depth)
	case traits.Lister:
		b.WriteByte('[')
		n := int(t.Size().(types.Int))
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := render(b, t.Get(types.Int(i)), depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		return fmt.Errorf("a %s has no JSON text", v.Type().TypeName())
	}
	return nil
}

func renderMap(b *bytes.Buffer, m traits.Mapper, depth int) error {
	type kv struct {
		k string
		v ref.Val
	}
	var items []kv
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		ks, ok := k.(types.String)
		if !ok {
			r, err := Render(k, false)
			if err != nil {
				return err
			}
			ks = types.String(r)
		}
		items = append(items, kv{string(ks), m.Get(k)})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].k < items[j].k })
	b.WriteByte('{')
	for i, e := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		s, _ := json.Marshal(e.k)
		b.Write(s)
		b.WriteByte(':')
		if err := render(b, e.v, depth+1); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// Lookup follows a dotted path through decoded JSON objects (FromJSON); a missing field
// or null is not found.
func Lookup(v any, path string) (any, bool) {
	for _, seg := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return v, v != nil
}

// Quoted is a decoded JSON value's canonical text, a string quoted: equal values by CEL's
// == (1 and 1.0 too) have equal texts, so it can index them.
func Quoted(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) && f > -1<<53 && f < 1<<53 {
		v = int64(f)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// PathPattern is a dotted path of identifiers ("data.orderId"), as a regexp.
const PathPattern = `[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*`
