package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

// The benchmarks find a local PostgreSQL's processes through a backend and read their
// CPU time, which grows with the work the server does.
func TestPGCPU(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	ctx := context.Background()
	p, ok, err := findPGCPU(ctx, url)
	require.NoError(t, err)
	require.True(t, ok, "the test's server runs on this machine")
	before, err := p.Us()
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	// Enough work for the kernel's 10 ms ticks to see it.
	_, err = conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 3000000) a, generate_series(1, 3) b`)
	require.NoError(t, err)

	after, err := p.Us()
	require.NoError(t, err)
	require.Greater(t, after, before)
}
