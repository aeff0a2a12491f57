package delivery

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		n       int64 // Content-Length; -1 unknown
		limit   int64
		want    string
		wantErr bool
	}{
		{"known length", "hello", 5, 10, "hello", false},
		{"unknown length", "hello", -1, 10, "hello", false},
		{"empty", "", 0, 10, "", false},
		{"zero length read as unknown", "hello", 0, 10, "hello", false},
		{"unknown length over the limit is cut", "hello world", -1, 5, "hello", false},
		{"declared over the limit is cut", "hello world", 11, 5, "hello", false},
		{"shorter than declared", "hel", 5, 10, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAnswer(strings.NewReader(tc.body), tc.n, tc.limit)
			if tc.wantErr {
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
