package pg

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the advisory lock key that serialises migrations between replicas
// starting at once ("duraton" in ASCII).
const migrationLock = 0x64757261746f6e

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded migrations in version order (file names NNNN_name.sql).
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("pg: migration file %q is not named NNNN_name.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate applies the migrations the database lacks, all in one transaction under a
// transaction-scoped advisory lock: a second replica starting at the same time waits,
// then finds them applied. (Transaction-scoped, so it also works behind a pooler in
// transaction mode.)
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("pg: migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS duraton_schema_versions (
			version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("pg: versions table: %w", err)
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM duraton_schema_versions`).Scan(&have); err != nil {
			return fmt.Errorf("pg: read schema version: %w", err)
		}
		if latest := ms[len(ms)-1].version; have > latest {
			return fmt.Errorf("pg: the database's schema is version %d, newer than this binary's %d: upgrade duraton", have, latest)
		}
		for _, m := range ms {
			if m.version <= have {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("pg: migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO duraton_schema_versions (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return fmt.Errorf("pg: record migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}
