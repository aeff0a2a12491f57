package netguard

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSelfAddrsRefusesOwnListeningAddresses(t *testing.T) {
	t.Parallel()
	s := &SelfAddrs{local: func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("93.184.216.34"), Mask: net.CIDRMask(24, 32)}}, nil
	}}
	require.NoError(t, s.Add("[::]:8080"))    // every local address, port 8080
	require.NoError(t, s.Add("8.8.4.4:9090")) // one address
	require.Error(t, s.Add("not an address"))
	p := Policy{Self: s}
	for _, tc := range []struct {
		addr string
		self bool
	}{
		{"93.184.216.34:8080", true},          // an interface address
		{"[::ffff:93.184.216.34]:8080", true}, // IPv4-mapped
		{"127.0.0.1:8080", true},
		{"93.184.216.35:8080", false}, // another host
		{"93.184.216.34:8081", false}, // another port
		{"8.8.4.4:9090", true},
		{"8.8.4.4:8081", false},
	} {
		err := p.Control("tcp", tc.addr, nil)
		require.Equal(t, tc.self, containsSelf(err), "%s: %v", tc.addr, err)
		if !tc.self {
			require.NoError(t, err, tc.addr)
		}
	}
	_, err := p.CheckURL("http://8.8.4.4:9090/v2/publish/x")
	require.ErrorContains(t, err, "own listening address")
	_, err = p.CheckURL("https://8.8.4.4/x")
	require.NoError(t, err)
}

func containsSelf(err error) bool {
	var blocked *BlockedError
	return errors.As(err, &blocked) && strings.HasPrefix(blocked.What, "this server's own")
}
