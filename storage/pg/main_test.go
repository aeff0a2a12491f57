package pg_test

import (
	"testing"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

// One PostgreSQL for the package's tests (each gets its own database).
func TestMain(m *testing.M) { pgtest.Main(m) }
