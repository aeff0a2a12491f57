package native

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// The search index reads the workflow and app of runs stored before Run.Workflow from
// the headers they were kept in: storage names them without importing sdk/wire.
func TestLegacyHeaderNamesMatchTheWire(t *testing.T) {
	require.Equal(t, wire.HeaderDuratonWorkflow, storage.LegacyWorkflowHeader)
	require.Equal(t, wire.HeaderDuratonApp, storage.LegacyAppHeader)
}
