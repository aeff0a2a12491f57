package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDamagedLogRefused: 12 messages published with a one-hour delay, the server
// SIGKILLed, one byte flipped in the payload of the 6th record of the write-ahead log.
// The restart refuses the log, naming the file and the offset and saying what to do,
// and changes nothing; `duraton check` reports it and exits 1; `duraton recover
// --drop-log-after OFFSET` is the explicit way on, printing what it drops, after which
// the server starts with the messages before the damage.
func TestDamagedLogRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	t.Parallel()
	dir, client, ids := publishTwelveAndKill(t)

	db := filepath.Join(dir, "duraton.db")
	segs, err := filepath.Glob(db + "-wal.*")
	require.NoError(t, err)
	slices.Sort(segs)
	require.NotEmpty(t, segs)
	seg := segs[len(segs)-1]
	recs := logRecords(t, seg)
	require.GreaterOrEqual(t, len(recs), 12, "one record per publish at least")
	sixth := recs[5]
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	data[sixth[0]+8+(sixth[1]/2)] ^= 0x01
	require.NoError(t, os.WriteFile(seg, data, 0o600))
	before := map[string][32]byte{db: sumFile(t, db), seg: sumFile(t, seg)}

	for _, mode := range []string{"dev", "serve"} {
		code, _, stderr := runBinary(t, mode, "--addr", "127.0.0.1:0", "--data", dir)
		require.Equal(t, 1, code, "%s started on a damaged log:\n%s", mode, stderr)
		require.Contains(t, stderr, seg)
		require.Contains(t, stderr, fmt.Sprintf("offset %d", sixth[0]))
		require.Contains(t, stderr, "duraton check --data "+dir)
		require.Contains(t, stderr, fmt.Sprintf("duraton recover --data %s --drop-log-after %d", dir, sixth[0]))
		require.Contains(t, stderr, "backup")
		require.NotContains(t, stderr, "goroutine ")
		for path, sum := range before {
			require.Equal(t, sum, sumFile(t, path), "%s modified %s", mode, path)
		}
	}

	code, stdout, stderr := runBinary(t, "check", "--data", dir)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stdout, seg)
	require.Contains(t, stdout, fmt.Sprintf("damaged at offset %d", sixth[0]))
	require.Contains(t, stdout, fmt.Sprintf("--drop-log-after %d", sixth[0]))
	for path, sum := range before {
		require.Equal(t, sum, sumFile(t, path), "check modified %s", path)
	}

	// The wrong offset is refused; the right one drops the tail and says so.
	code, _, stderr = runBinary(t, "recover", "--data", dir, "--drop-log-after", strconv.Itoa(sixth[0]+1))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, fmt.Sprintf("damage is at offset %d", sixth[0]))
	code, stdout, stderr = runBinary(t, "recover", "--data", dir, "--drop-log-after", strconv.Itoa(sixth[0]))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, fmt.Sprintf("dropped %s from offset %d", seg, sixth[0]))
	m := regexp.MustCompile(`holding (\d+) records`).FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	require.Equal(t, strconv.Itoa(len(recs)-6), m[1], stdout)

	code, _, stderr = runBinary(t, "check", "--data", dir)
	require.Equal(t, 0, code, stderr)
	p := startDuratonAddr(t, dir, "127.0.0.1:0")
	kept := 0
	for _, id := range ids {
		if messageExists(t, client, p, id) {
			kept++
		}
	}
	// Records before the damage hold the messages published before it (the first
	// records of a start may hold other writes).
	require.Positive(t, kept)
	require.Less(t, kept, 12)
	p.Stop()
}

// TestDamagedLogKeepsAllWhenIntact is the same run without the damage: all 12 come
// back after the SIGKILL.
func TestDamagedLogKeepsAllWhenIntact(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	t.Parallel()
	dir, client, ids := publishTwelveAndKill(t)
	p := startDuratonAddr(t, dir, "127.0.0.1:0")
	for _, id := range ids {
		require.True(t, messageExists(t, client, p, id), "message %s lost", id)
	}
	p.Stop()
}

// logRecords lists the [offset, length] of the records of a log segment up to its end.
func logRecords(t *testing.T, path string) [][2]int {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out [][2]int
	for off := 36; off+8 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[off:]))
		if n == 0 {
			break
		}
		out = append(out, [2]int{off, n})
		off += 8 + n
	}
	return out
}

func publishDelayed(client *http.Client, p *proc, dest, body string) (string, error) {
	req, err := p.apiRequest(context.Background(), http.MethodPost, "/v2/publish/"+dest, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Upstash-Delay", "1h")
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		return "", fmt.Errorf("HTTP %d: %s", res.StatusCode, raw)
	}
	m := regexp.MustCompile(`"messageId":"([^"]+)"`).FindSubmatch(raw)
	if m == nil {
		return "", fmt.Errorf("no messageId in %s", raw)
	}
	return string(m[1]), nil
}

func messageExists(t *testing.T, client *http.Client, p *proc, id string) bool {
	req, err := p.apiRequest(context.Background(), http.MethodGet, "/v2/messages/"+id, nil)
	require.NoError(t, err)
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	require.Contains(t, []int{200, 404}, res.StatusCode)
	return res.StatusCode == 200
}

// publishTwelveAndKill publishes 12 messages with a one-hour delay to a server on a new
// data directory, then SIGKILLs it. It returns the directory, a client and the ids.
func publishTwelveAndKill(t *testing.T) (dir string, client *http.Client, ids []string) {
	t.Helper()
	dir = t.TempDir()
	p := startDuratonAddr(t, dir, "127.0.0.1:0")
	client = newAPIClient(t, 10*time.Second)
	for i := range 12 {
		id, err := publishDelayed(client, p, "http://127.0.0.1:9/never", fmt.Sprintf("message-%02d", i))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	p.Kill()
	return dir, client, ids
}
