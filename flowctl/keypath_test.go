package flowctl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckKeyPath(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"accountId", "user.id", "a.b.c", "x-y", "0"} {
		require.NoError(t, CheckKeyPath(ok), ok)
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", ".", string(make([]byte, MaxKeyPathLen+1))} {
		require.Error(t, CheckKeyPath(bad), "%q", bad)
	}
}

// TestResolveKey is the table of docs/protocol.md, "Controls".
func TestResolveKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data, path string
		want       string
		ok         bool
	}{
		{`{"user":"a"}`, "user", `"a"`, true},
		{`{}`, "user", "", false},
		{`{"user":{"id":1}}`, "user", "", false},
		{`{"user":{"id":1}}`, "user.id", "1", true},
		{`{"user":null}`, "user", "", false},
		{`{"user":"null"}`, "user", `"null"`, true},
		{`{"user":"1"}`, "user", `"1"`, true},
		{`{"user":1}`, "user", `1`, true},
		{`{"user":true}`, "user", `true`, true},
		{`{"user":[1]}`, "user", "", false},
		{`{"user":"\u0061"}`, "user", `"a"`, true},
		{`{"user":{"id":{"x":1}}}`, "user.id.x", "1", true},
		{`{"user":"a"}`, "user.id", "", false},
		{`[1,2]`, "user", "", false},
		{`"text"`, "user", "", false},
		{`{"user":"a"}`, "", "", false},
	}
	for _, tt := range tests {
		got, ok := ResolveKey([]byte(tt.data), tt.path)
		require.Equal(t, tt.ok, ok, "%s %s", tt.data, tt.path)
		require.Equal(t, tt.want, got, "%s %s", tt.data, tt.path)
	}
}

// A key value longer than MaxKeyValueLen is its hash: bounded, one per distinct value,
// the same for every spelling of it; a value at the limit is kept as it is.
func TestResolveKeyHashesLongValues(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 6000)
	a, ok := ResolveKey([]byte(`{"id":"`+long+`"}`), "id")
	require.True(t, ok)
	require.Len(t, a, len("sha256:")+64)
	require.True(t, strings.HasPrefix(a, "sha256:"))
	b, _ := ResolveKey([]byte(`{"id":"`+long[:5999]+`\u006b"}`), "id")
	require.Equal(t, a, b, "one value, two spellings: one key")
	c, _ := ResolveKey([]byte(`{"id":"`+long[:5999]+`j"}`), "id")
	require.NotEqual(t, a, c)
	atLimit := strings.Repeat("k", MaxKeyValueLen-2) // with its quotes: MaxKeyValueLen
	v, _ := ResolveKey([]byte(`{"id":"`+atLimit+`"}`), "id")
	require.Equal(t, `"`+atLimit+`"`, v)
	n, _ := ResolveKey([]byte(`{"id":1`+strings.Repeat("0", 300)+`}`), "id")
	require.True(t, strings.HasPrefix(n, "sha256:"), "a long number too")
}
