package netguard_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/netguard"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()

	tests := []struct {
		addr    string
		wantErr string // substring of the error; empty: allowed
	}{
		// Public destinations.
		{addr: "8.8.8.8"},
		{addr: "1.1.1.1"},
		{addr: "93.184.216.34"},
		{addr: "172.32.0.1"},    // just above 172.16.0.0/12
		{addr: "100.128.0.1"},   // just above 100.64.0.0/10
		{addr: "198.20.0.1"},    // just above 198.18.0.0/15
		{addr: "168.63.129.17"}, // next to the Azure wire server
		{addr: "223.255.255.255"},
		{addr: "2606:4700:4700::1111"},
		{addr: "2a00:1450:4001::1"},
		{addr: "::ffff:8.8.8.8"},

		// Loopback, in several spellings.
		{addr: "127.0.0.1", wantErr: "destination 127.0.0.1 is a loopback address (127.0.0.0/8)"},
		{addr: "127.255.255.254", wantErr: "loopback"},
		{addr: "::1", wantErr: "destination ::1 is a loopback address"},
		{addr: "::ffff:127.0.0.1", wantErr: "destination ::ffff:127.0.0.1 is a loopback address (127.0.0.0/8)"},
		{addr: "0:0:0:0:0:ffff:7f00:1", wantErr: "loopback"},
		{addr: "::7f00:1", wantErr: "IPv4-compatible"},

		// Unspecified and "this network".
		{addr: "0.0.0.0", wantErr: "unspecified"},
		{addr: "::", wantErr: "unspecified"},
		{addr: "0.1.2.3", wantErr: "this network"},

		// Private, shared and link-local.
		{addr: "10.0.0.1", wantErr: "private address (10.0.0.0/8)"},
		{addr: "172.16.0.1", wantErr: "private"},
		{addr: "172.31.255.255", wantErr: "private"},
		{addr: "192.168.1.1", wantErr: "private"},
		{addr: "::ffff:10.1.2.3", wantErr: "private"},
		{addr: "100.64.0.1", wantErr: "carrier-grade NAT"},
		{addr: "100.127.255.255", wantErr: "carrier-grade NAT"},
		{addr: "169.254.1.1", wantErr: "link-local"},
		{addr: "fe80::1", wantErr: "link-local"},
		{addr: "fe80::1%eth0", wantErr: "link-local"},
		{addr: "fc00::1", wantErr: "unique local"},
		{addr: "fdff:ffff::1", wantErr: "unique local"},
		{addr: "fec0::1", wantErr: "site-local"},

		// Cloud metadata.
		{addr: "169.254.169.254", wantErr: "cloud metadata"},
		{addr: "::ffff:169.254.169.254", wantErr: "cloud metadata"},
		{addr: "168.63.129.16", wantErr: "cloud metadata"},
		{addr: "100.100.100.200", wantErr: "cloud metadata"},
		{addr: "fd00:ec2::254", wantErr: "cloud metadata"},

		// Multicast, broadcast, reserved, benchmarking, documentation.
		{addr: "224.0.0.1", wantErr: "multicast"},
		{addr: "239.255.255.250", wantErr: "multicast"},
		{addr: "ff02::1", wantErr: "multicast"},
		{addr: "255.255.255.255", wantErr: "broadcast"},
		{addr: "240.0.0.1", wantErr: "reserved"},
		{addr: "198.18.0.1", wantErr: "benchmarking"},
		{addr: "198.19.255.255", wantErr: "benchmarking"},
		{addr: "192.0.2.1", wantErr: "documentation"},
		{addr: "2001:db8::1", wantErr: "documentation"},
		{addr: "100::1", wantErr: "discard-only"},

		// IPv6 forms that embed an IPv4 address.
		{addr: "64:ff9b::7f00:1", wantErr: "NAT64"},
		{addr: "64:ff9b::a9fe:a9fe", wantErr: "NAT64"},
		{addr: "64:ff9b:1::1", wantErr: "NAT64"},
		{addr: "2002:7f00:1::1", wantErr: "6to4"},
		{addr: "2001:0:4136:e378::1", wantErr: "Teredo"},
		{addr: "::ffff:0:7f00:1", wantErr: "IPv4-translated"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()

			err := netguard.Policy{}.CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var blocked *netguard.BlockedError
			require.ErrorAs(t, err, &blocked)
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, netip.MustParseAddr(tt.addr), blocked.Addr)
		})
	}
}

func TestCheckAddrInvalid(t *testing.T) {
	t.Parallel()

	require.Error(t, netguard.Policy{}.CheckAddr(netip.Addr{}))
}

func TestCheckAddrAllow(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		allow   []string
		addr    string
		allowed bool
	}{
		{name: "LoopbackV4", allow: nil, addr: "127.0.0.1", allowed: false},
		{name: "LoopbackV4Allowed", allow: []string{"127.0.0.0/8", "::1/128"}, addr: "127.0.0.1", allowed: true},
		{name: "LoopbackV6Allowed", allow: []string{"127.0.0.0/8", "::1/128"}, addr: "::1", allowed: true},
		{name: "MappedLoopbackAllowed", allow: []string{"127.0.0.0/8"}, addr: "::ffff:127.0.0.1", allowed: true},
		{name: "LoopbackDoesNotOpenPrivate", allow: []string{"127.0.0.0/8"}, addr: "10.0.0.1", allowed: false},
		{name: "PrivateSubnet", allow: []string{"10.20.0.0/16"}, addr: "10.20.3.4", allowed: true},
		{name: "PrivateOutsideSubnet", allow: []string{"10.20.0.0/16"}, addr: "10.21.0.1", allowed: false},
		{name: "SingleMetadataHost", allow: []string{"169.254.169.254/32"}, addr: "169.254.169.254", allowed: true},
		{name: "ZonedLinkLocal", allow: []string{"fe80::/10"}, addr: "fe80::1%eth0", allowed: true},
		{name: "PublicStillAllowed", allow: []string{"10.0.0.0/8"}, addr: "8.8.8.8", allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			var p netguard.Policy
			for _, c := range tt.allow {
				p.Allow = append(p.Allow, netip.MustParsePrefix(c))
			}
			err := p.CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.allowed {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestLoopbackPrefixes(t *testing.T) {
	t.Parallel()

	got := netguard.LoopbackPrefixes()
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, got)
	got[0] = netip.Prefix{} // callers own the slice
	require.Equal(t, netip.MustParsePrefix("127.0.0.0/8"), netguard.LoopbackPrefixes()[0])
}

func TestControl(t *testing.T) {
	t.Parallel()

	tests := []struct {
		network, address string
		wantErr          string
	}{
		{network: "tcp4", address: "8.8.8.8:443"},
		{network: "tcp6", address: "[2606:4700:4700::1111]:443"},
		{network: "tcp4", address: "127.0.0.1:80", wantErr: "loopback"},
		{network: "tcp6", address: "[::1]:80", wantErr: "loopback"},
		{network: "tcp6", address: "[::ffff:169.254.169.254]:80", wantErr: "cloud metadata"},
		{network: "tcp6", address: "[fe80::1%eth0]:80", wantErr: "link-local"},
		{network: "tcp", address: "127.0.0.1", wantErr: "missing port"},
		{network: "tcp", address: "example.com:80", wantErr: "not an IP address"},
		{network: "tcp", address: "", wantErr: "dial address"},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			t.Parallel()

			err := netguard.Policy{}.Control(tt.network, tt.address, nil)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
