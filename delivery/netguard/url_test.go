package netguard_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/netguard"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()

	loopbackOK := netguard.Policy{Allow: netguard.LoopbackPrefixes()}

	tests := []struct {
		name    string
		raw     string
		policy  netguard.Policy
		wantErr string // substring; empty: accepted
	}{
		{name: "HTTPS", raw: "https://example.com/api/workflow?x=1"},
		{name: "HTTPWithPort", raw: "http://example.com:8080/"},
		{name: "UpperCaseScheme", raw: "HTTPS://Example.com/"},
		{name: "PublicIPv4", raw: "http://8.8.8.8/"},
		{name: "PublicIPv6", raw: "http://[2606:4700:4700::1111]:443/"},
		{name: "HostnameLeftToDial", raw: "http://localhost:3000/"},
		{name: "TrailingDotHostname", raw: "https://example.com./"},
		{name: "DigitLeadingHostname", raw: "https://1e100.net/"},
		{name: "LoopbackAllowed", raw: "http://[::1]:3000/", policy: loopbackOK},
		{name: "LegacyLoopbackAllowed", raw: "http://127.1:3000/", policy: loopbackOK},

		{name: "Empty", raw: "", wantErr: "must be absolute"},
		{name: "Relative", raw: "example.com/path", wantErr: "must be absolute"},
		{name: "FTP", raw: "ftp://example.com/file", wantErr: `scheme "ftp" is not allowed`},
		{name: "File", raw: "file:///etc/passwd", wantErr: `scheme "file" is not allowed`},
		{name: "Gopher", raw: "gopher://127.0.0.1:6379/_", wantErr: `scheme "gopher" is not allowed`},
		{name: "Mailto", raw: "mailto:ops@example.com", wantErr: `scheme "mailto" is not allowed`},
		{name: "UserInfo", raw: "https://user:s3cret@example.com/", wantErr: "must not contain user credentials"},
		{name: "UserOnly", raw: "https://user@example.com/", wantErr: "must not contain user credentials"},
		{name: "MissingHost", raw: "http:///path", wantErr: "has no host"},
		{name: "PortOnly", raw: "http://:8080/", wantErr: "has no host"},
		{name: "Opaque", raw: "http:example.com", wantErr: "has no host"},
		{name: "Unparsable", raw: "http://exa mple.com/", wantErr: "destination URL is invalid"},
		{name: "BadEscape", raw: "http://%zz/", wantErr: "destination URL is invalid"},

		{name: "IPv6Loopback", raw: "http://[::1]/", wantErr: "destination ::1 is a loopback address"},
		{name: "IPv4Loopback", raw: "http://127.0.0.1:8080/", wantErr: "loopback"},
		{name: "MappedLoopback", raw: "http://[::ffff:127.0.0.1]/", wantErr: "loopback"},
		{name: "Metadata", raw: "http://169.254.169.254/latest/meta-data/", wantErr: "cloud metadata"},
		{name: "ZonedLinkLocal", raw: "http://[fe80::1%25eth0]/", wantErr: "link-local"},
		{name: "Private", raw: "https://10.0.0.5/hook", wantErr: "private"},
		{name: "ShortForm", raw: "http://127.1/", wantErr: "destination 127.0.0.1 is a loopback"},
		{name: "Decimal", raw: "http://2130706433/", wantErr: "destination 127.0.0.1 is a loopback"},
		{name: "Hex", raw: "http://0x7f000001/", wantErr: "destination 127.0.0.1 is a loopback"},
		{name: "HexDotted", raw: "http://0x7f.0.0.1/", wantErr: "destination 127.0.0.1 is a loopback"},
		{name: "Octal", raw: "http://0177.0.0.1/", wantErr: "destination 127.0.0.1 is a loopback"},
		{name: "OctalMetadata", raw: "http://0251.0376.0251.0376/", wantErr: "cloud metadata"},
		{name: "TrailingDotIP", raw: "http://10.0.0.1./", wantErr: "private"},
		{name: "ZeroShort", raw: "http://0/", wantErr: "unspecified"},
		{name: "TooManyParts", raw: "http://1.2.3.4.5/", wantErr: "neither a valid IPv4 address nor a hostname"},
		{name: "OctetOverflow", raw: "http://256.1.1.1/", wantErr: "neither a valid IPv4 address"},
		{name: "LastPartOverflow", raw: "http://1.2.65536/", wantErr: "neither a valid IPv4 address"},
		{name: "BadOctal", raw: "http://08.0.0.1/", wantErr: "neither a valid IPv4 address"},
		{name: "NumericLastLabel", raw: "http://example.123/", wantErr: "neither a valid IPv4 address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			u, err := tt.policy.CheckURL(tt.raw)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, u)
				return
			}
			require.Nil(t, u)
			require.ErrorContains(t, err, tt.wantErr)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
}

// FuzzCheckURL: CheckURL must not panic, and an accepted URL is http(s) without
// credentials and with a host.
func FuzzCheckURL(f *testing.F) {
	for _, seed := range []string{
		"https://example.com/", "http://[::1]/", "http://127.1/", "http://0x7f.1/",
		"http://user:pw@h/", "ftp://x", "http://[fe80::1%25eth0]/", "http://1.2.3.4.5/", "http://0x/",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := netguard.Policy{}.CheckURL(raw)
		if err != nil {
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.User != nil || u.Hostname() == "" {
			t.Fatalf("CheckURL(%q) accepted %#v", raw, u)
		}
	})
}
