package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// query connects to url and returns the name of the database and whether fsync is on.
func query(t *testing.T, url string) (db, fsync string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT current_database(), current_setting('fsync')").Scan(&db, &fsync); err != nil {
		t.Fatal(err)
	}
	return db, fsync
}

// Two databases of one cluster are separate: a table made in one is not in the other.
func TestClusterDatabases(t *testing.T) {
	c := pgtest.Shared(t)
	urlA, urlB := c.NewDatabase(t), c.NewDatabase(t)
	if urlA == urlB {
		t.Fatalf("two databases share the URL %s", urlA)
	}
	ctx := context.Background()
	dbA, fsync := query(t, urlA)
	dbB, _ := query(t, urlB)
	if dbA == dbB {
		t.Fatalf("both URLs reach database %s", dbA)
	}
	if fsync != "on" {
		t.Fatalf("fsync = %s, want on", fsync)
	}

	conn, err := pgx.Connect(ctx, urlA)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE only_in_a (v int); INSERT INTO only_in_a VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM only_in_a").Scan(&v); err != nil || v != 42 {
		t.Fatalf("read back %d, %v; want 42", v, err)
	}

	connB, err := pgx.Connect(ctx, urlB)
	if err != nil {
		t.Fatal(err)
	}
	defer connB.Close(ctx)
	var n int
	if err := connB.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s sees a table created in %s", dbB, dbA)
	}
}

// A cluster of its own is stopped, and its files removed, when its test ends.
func TestStartStops(t *testing.T) {
	var c *pgtest.Cluster
	t.Run("own", func(t *testing.T) {
		c = pgtest.Start(t)
		if db, _ := query(t, c.NewDatabase(t)); db == "" {
			t.Fatal("no database name")
		}
	})
	if c == nil {
		t.Skip("the cluster did not start (see the subtest)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err == nil {
		conn.Close(ctx)
		t.Fatalf("the cluster on port %d still answers after its test ended", c.Port())
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Fatalf("the cluster's directory %s is still there (stat: %v)", c.Dir(), err)
	}
}
