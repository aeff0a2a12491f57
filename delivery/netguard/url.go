package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// CheckURL parses a destination URL and rejects what is wrong on its face: a scheme
// other than http or https, user credentials, a missing host, or a host that is an IP
// address the policy blocks. IP addresses in legacy spellings that resolvers accept
// (127.1, 2130706433, 0x7f000001, 0177.0.0.1) are decoded and checked the same way.
// Hostnames are not resolved: the dial-time check is the real boundary. Errors are
// meant for the user and name the problem.
//
// The query is normalised: a byte a URI's query may not hold (a space, quotes, <, >, a
// '%' that starts no escape, a non-ASCII byte, ...) is percent-encoded, as a browser
// does, since the query goes into the request line verbatim and such bytes break it.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // drop the echo of the raw URL, which may hold credentials
		}
		return nil, fmt.Errorf("destination URL is invalid: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
	case "":
		return nil, errors.New("destination URL must be absolute and start with http:// or https://")
	default:
		return nil, fmt.Errorf("destination URL scheme %q is not allowed: use http or https", u.Scheme)
	}
	if u.User != nil {
		return nil, errors.New("destination URL must not contain user credentials")
	}
	u.RawQuery = escapeQuery(u.RawQuery)
	host := u.Hostname()
	if host == "" {
		return nil, errors.New("destination URL has no host")
	}
	a, isIP, err := hostAddr(host)
	if err != nil {
		return nil, err
	}
	if isIP {
		if err := p.CheckAddr(a); err != nil {
			return nil, err
		}
		if err := p.checkSelf(a, urlPort(u)); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// hostAddr returns the address a URL host denotes if it is an IP literal, standard or
// legacy; isIP is false for a hostname.
func hostAddr(host string) (a netip.Addr, isIP bool, err error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a, true, nil
	}
	if !looksNumeric(host) {
		return netip.Addr{}, false, nil
	}
	a, ok := parseLegacyIPv4(strings.TrimSuffix(host, "."))
	if !ok {
		return netip.Addr{}, false, fmt.Errorf("destination host %q is neither a valid IPv4 address nor a hostname", host)
	}
	return a, true, nil
}

// looksNumeric reports whether host's last label is a number (decimal digits, or 0x
// and hex digits). Such a host is an IPv4 address to URL parsers and to inet_aton, never
// a DNS name, as in the WHATWG URL standard's "ends in a number" rule.
func looksNumeric(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		last = rest
		return strings.Trim(last, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// parseLegacyIPv4 decodes the inet_aton forms of an IPv4 address: one to four parts,
// each decimal, octal (leading 0) or hex (0x); the last part fills the remaining bytes.
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, part := range parts {
		n, ok := parseLegacyPart(part)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 0xff {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		room := uint(8 * (4 - i)) // bits left for the last part
		if n >= 1<<room {
			return netip.Addr{}, false
		}
		v = v<<room | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseLegacyPart(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true // "0x" alone is zero, as for inet_aton and WHATWG
		}
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 32)
	return n, err == nil
}

// urlPort is the port a URL connects to (its scheme's default if it names none; 0 if the
// port is not a number, which no dial reaches).
func urlPort(u *url.URL) uint16 {
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0
		}
		return uint16(n)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// escapeQuery percent-encodes the bytes of a raw query that RFC 3986 does not allow
// there (besides unreserved characters, sub-delimiters, ':', '@', '/' and '?', only
// "%XX" escapes, which stay as they are). The single quote, a sub-delimiter, is
// encoded too, as browsers do. Decoded, the query means what it meant.
func escapeQuery(q string) string {
	keep := func(i int) bool {
		c := q[i]
		if c == '%' {
			return i+2 < len(q) && isHex(q[i+1]) && isHex(q[i+2])
		}
		return c != '\'' && strings.IndexByte(queryChars, c) >= 0
	}
	i := 0
	for i < len(q) && keep(i) {
		i++
	}
	if i == len(q) {
		return q
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(q) + 16)
	b.WriteString(q[:i])
	for ; i < len(q); i++ {
		if keep(i) {
			b.WriteByte(q[i])
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[q[i]>>4])
		b.WriteByte(hex[q[i]&15])
	}
	return b.String()
}

// queryChars are the bytes a query may hold literally (RFC 3986 §3.4: pchar / "/" / "?").
const queryChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?"

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
