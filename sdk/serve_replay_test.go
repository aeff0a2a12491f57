package sdk_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

func TestServeSubjectOptions(t *testing.T) {
	t.Parallel()
	const at, signed = "http://10.0.0.7:8080/internal/wf", "https://api.example.com/wf"

	t.Run("WithWorkflowURL", func(t *testing.T) {
		t.Parallel()
		h := subjectHandler(sdk.WithWorkflowURL(signed))
		require.Empty(t, verifyFailure(t, h, signedDelivery(t, at, signed, "j1")), "behind a proxy the configured URL is the subject")
		require.NotEmpty(t, verifyFailure(t, h, signedDelivery(t, at, "https://api.example.com/other", "j2")))
	})

	t.Run("WithoutSubjectCheck", func(t *testing.T) {
		t.Parallel()
		h := subjectHandler(sdk.WithoutSubjectCheck())
		require.Empty(t, verifyFailure(t, h, signedDelivery(t, at, "https://anything.example/else", "j1")))
	})

	t.Run("ReplayCache", func(t *testing.T) {
		t.Parallel()
		h := subjectHandler(sdk.WithReplayCache(sdk.NewReplayCache(0)))
		first := signedDelivery(t, at, at, "jti-1")
		replay := first.Clone(first.Context())
		replay.Body = signedDelivery(t, at, at, "jti-1").Body
		require.Empty(t, verifyFailure(t, h, first))
		require.Contains(t, verifyFailure(t, h, replay), "replayed")
		require.Empty(t, verifyFailure(t, h, signedDelivery(t, at, at, "jti-2")), "a new attempt has a new jti")

		require.Empty(t, verifyFailure(t, subjectHandler(), signedDelivery(t, at, at, "jti-1")), "without the cache a replay passes")
	})
}
