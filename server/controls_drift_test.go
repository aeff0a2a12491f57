package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
)

// The workflow controls' JSON shape is declared twice: flowctl validates what the server
// accepts, sdk/wire is what clients send and read. Every field of either, filled, must
// decode strictly into the other and come back as the same JSON, so they cannot drift.
func TestControlsShapesAgree(t *testing.T) {
	check := func(from any, into any) {
		t.Helper()
		fill(reflect.ValueOf(from).Elem())
		raw, err := json.Marshal(from)
		require.NoError(t, err)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(into), "%s", raw)
		back, err := json.Marshal(into)
		require.NoError(t, err)
		require.JSONEq(t, string(raw), string(back))
	}
	check(&flowctl.Controls{}, &wire.Controls{})
	check(&wire.Controls{}, &flowctl.Controls{})
}

// fill gives every field of v a non-zero value (one element for slices).
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.String:
		v.SetString("k")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	}
}
