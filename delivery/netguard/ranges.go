package netguard

import "net/netip"

// blockedRange is a destination range that is refused unless allow-listed.
type blockedRange struct {
	prefix netip.Prefix
	what   string // completes "destination <addr> is …"
}

// blocked is the block list, in lookup order. It is built once from the literals in
// blockedRanges and never written to.
var blocked = blockedRanges()

// blockedRanges returns every range docs/operations.md ("Destinations (SSRF)") blocks
// plus a few reserved ranges that are never a legitimate webhook target (documentation,
// discard-only, IPv4-compatible and IPv4-translated IPv6, Teredo). Single addresses come
// before the ranges containing them so errors give the most precise reason. IPv4-mapped
// IPv6 (::ffff:0:0/96) is absent on purpose: CheckAddr unmaps before looking up.
func blockedRanges() []blockedRange {
	const (
		unspecified = "an unspecified address"
		loopback    = "a loopback address"
		private     = "a private address"
		metadata    = "a cloud metadata address"
		linkLocal   = "a link-local address"
		multicast   = "a multicast address"
		reserved    = "a reserved address"
		docs        = "a documentation address"
		nat64       = "a NAT64 address"
	)
	table := []struct{ cidr, what string }{
		// IPv4.
		{"0.0.0.0/32", unspecified},
		{"0.0.0.0/8", "a \"this network\" address"},
		{"127.0.0.0/8", loopback},
		{"10.0.0.0/8", private},
		{"172.16.0.0/12", private},
		{"192.168.0.0/16", private},
		{"100.100.100.200/32", metadata}, // Alibaba Cloud, inside CGNAT
		{"100.64.0.0/10", "a carrier-grade NAT address"},
		{"169.254.169.254/32", metadata}, // AWS, GCP, Azure, OpenStack IMDS
		{"169.254.0.0/16", linkLocal},
		{"168.63.129.16/32", metadata}, // Azure wire server, publicly routed
		{"192.0.2.0/24", docs},
		{"198.51.100.0/24", docs},
		{"203.0.113.0/24", docs},
		{"198.18.0.0/15", "a benchmarking address"},
		{"224.0.0.0/4", multicast},
		{"255.255.255.255/32", "the broadcast address"},
		{"240.0.0.0/4", reserved},

		// IPv6.
		{"::/128", unspecified},
		{"::1/128", loopback},
		{"::/96", "an IPv4-compatible address"},
		{"::ffff:0:0:0/96", "an IPv4-translated address"},
		{"64:ff9b::/96", nat64},
		{"64:ff9b:1::/48", nat64},
		{"100::/64", "a discard-only address"},
		{"2001::/32", "a Teredo address"},
		{"2001:db8::/32", docs},
		{"2002::/16", "a 6to4 address"},
		{"fd00:ec2::254/128", metadata}, // AWS IMDS over IPv6, inside ULA
		{"fc00::/7", "a unique local address"},
		{"fe80::/10", linkLocal},
		{"fec0::/10", "a site-local address"},
		{"ff00::/8", multicast},
	}
	out := make([]blockedRange, len(table))
	for i, r := range table {
		out[i] = blockedRange{prefix: netip.MustParsePrefix(r.cidr), what: r.what}
	}
	return out
}

// LoopbackPrefixes returns 127.0.0.0/8 and ::1/128, to allow-list local destinations
// in development. Each call returns a new slice.
func LoopbackPrefixes() []netip.Prefix {
	return []netip.Prefix{
		netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 0, 0, 0}), 8),
		netip.PrefixFrom(netip.IPv6Loopback(), 128),
	}
}
