package netguard_test

import (
	"net/url"
	"strings"
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

// TestCheckURLNormalisesQuery: bytes a query may not hold are percent-encoded, so the
// URL goes into a request line intact; what is already valid is left as it is.
func TestCheckURLNormalisesQuery(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ raw, want string }{
		{"https://example.com/wf?x=<script>alert(1)</script>", "https://example.com/wf?x=%3Cscript%3Ealert(1)%3C/script%3E"},
		{`https://example.com/wf?q="a b"&n='1'`, "https://example.com/wf?q=%22a%20b%22&n=%271%27"},
		{"https://example.com/wf?ids[]=1&p=a|b^c`{}\\", "https://example.com/wf?ids%5B%5D=1&p=a%7Cb%5Ec%60%7B%7D%5C"},
		{"https://example.com/wf?pct=100%&ok=%41%2f&tail=%4", "https://example.com/wf?pct=100%25&ok=%41%2f&tail=%254"},
		{"https://example.com/wf?name=z\u00fcrich", "https://example.com/wf?name=z%C3%BCrich"},
		{"https://example.com/wf?a=1&b=x/y?z:@!$'()*+,;=-._~", "https://example.com/wf?a=1&b=x/y?z:@!$%27()*+,;=-._~"},
		{"https://example.com/wf?a=1&b=2", "https://example.com/wf?a=1&b=2"},
		{"https://example.com/a%20b?", "https://example.com/a%20b?"},
	} {
		u, err := netguard.Policy{}.CheckURL(tt.raw)
		require.NoError(t, err, tt.raw)
		require.Equal(t, tt.want, u.String(), tt.raw)
		_, err = url.ParseRequestURI(u.RequestURI())
		require.NoError(t, err)
		require.NotContains(t, u.RequestURI(), " ")
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
		if strings.ContainsAny(u.RawQuery, " \"<>'\\^`{|}") {
			t.Fatalf("CheckURL(%q) left the query %q unescaped", raw, u.RawQuery)
		}
	})
}
