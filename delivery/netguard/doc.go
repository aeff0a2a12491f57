// Package netguard owns the SSRF boundary of outbound deliveries (docs/operations.md,
// "Destinations (SSRF)"): which destination addresses Duraton may connect to, and an
// http.Transport that enforces it.
//
// The real check happens at dial time, after DNS resolution, on every connection the
// transport opens (including each redirect hop), through net.Dialer.Control. Checking
// hostnames up front is defeated by DNS rebinding and alternate IP spellings, so
// CheckURL only rejects what is wrong on its face (scheme, credentials, missing host, a
// literal IP in a blocked range) to give a fast, explanatory 400 at publish time.
//
// The transport never uses a proxy: an HTTP_PROXY from the environment would carry
// requests past the dial check. It does not decide about redirects; the http.Client
// built around it should refuse them (CheckRedirect), as 3xx counts as a failure.
//
// Error texts are meant for the tenant who owns the destination and name the problem
// ("destination 127.0.0.1 is a loopback address (127.0.0.0/8)"); they carry no response
// bodies and no other tenant's data.
//
// netguard imports only the standard library and must not import any other Duraton
// package.
package netguard
