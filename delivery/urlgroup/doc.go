// Package urlgroup keeps QStash URL groups (/v2/topics): a named list of endpoints that a
// publication to the group's name fans out to, one message per endpoint (the server
// builds those messages and publishes them in one transaction; each then has its own id,
// retries and logs).
//
// It owns the group records and their limits only, and imports storage alone. Endpoint
// URLs are validated by the caller (the server's destination check) before they get here.
package urlgroup
