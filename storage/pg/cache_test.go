package pg

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValueCacheBoundedLRU(t *testing.T) {
	c := newValueCache(10*(96+2+10), func() int64 { return 0 }) // room for ten 2-byte keys with 10-byte values
	val := bytes.Repeat([]byte("v"), 10)
	for i := range 12 {
		c.put(1, fmt.Sprintf("%02d", i), val, true)
	}
	require.LessOrEqual(t, c.size, c.maxBytes)
	_, _, ok := c.get(1, []byte("00"))
	require.False(t, ok, "the least recently used went first")
	_, _, ok = c.get(1, []byte("01"))
	require.False(t, ok)
	v, present, ok := c.get(1, []byte("11"))
	require.True(t, ok)
	require.True(t, present)
	require.Equal(t, val, v)

	c.put(1, "absent", nil, false)
	_, present, ok = c.get(1, []byte("absent"))
	require.True(t, ok, "absence is cached too")
	require.False(t, present)

	c.drop(1, "11")
	_, _, ok = c.get(1, []byte("11"))
	require.False(t, ok)

	_, _, ok = c.get(2, []byte("05"))
	require.False(t, ok, "keys are per bucket")

	c.put(1, "05", make([]byte, maxCachedValue+1), true)
	_, _, ok = c.get(1, []byte("05"))
	require.False(t, ok, "a big value is not kept, and replaces the old one's entry")
}
