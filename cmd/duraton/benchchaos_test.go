package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBenchChaosSmall runs `duraton bench chaos` on a small load: a real duraton process,
// SIGKILLed twice under chaotic workflow and message load, must end with every
// acknowledged run terminal, no step recorded twice and no acknowledged message lost.
func TestBenchChaosSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	bin, err := duratonBinary()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = runBench(ctx, []string{"chaos", "--bin", bin, "--runs", "40", "--messages", "40", "--kills", "2", "--kill-every", "100ms", "--seed", "7"}, &out, &errOut)
	require.NoError(t, err, "stderr:\n%s\nresult: %s", errOut.String(), out.String())
	var res benchChaosResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), "%s", out.String())
	require.Equal(t, 2, res.Kills)
	require.Equal(t, 3, res.Starts)
	require.Len(t, res.LiveRunsAtKills, 2)
	require.Positive(t, res.LiveRunsAtKills[0], "the first kill hit runs in flight")
	require.Equal(t, 40, res.RunsAcked)
	require.Equal(t, 40, res.RunsSucceeded+res.RunsFailed)
	require.Zero(t, res.RunsNotTerminal+res.RunsLost+res.DuplicateSteps+res.MessagesLost)
	require.Equal(t, 40, res.MessagesDeliv+res.MessagesDLQ)
	if res.RunsFailed == 0 {
		require.Equal(t, 4*40, res.StepsRecorded, "three steps and a sleep per run")
	}
	require.Positive(t, res.Chaos.DroppedAfter+res.Chaos.Failed+res.Chaos.Hung, "the endpoint misbehaved")
}

// TestBenchChaosTSNativeSmall is TestBenchChaosSmall with the workflow served by
// @duraton/sdk in a node child (answering inline) behind the same chaos.
func TestBenchChaosTSNativeSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary, and node")
	}
	bin, err := duratonBinary()
	require.NoError(t, err)
	dir := builtSDKJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = runBench(ctx, []string{"chaos", "--bin", bin, "--endpoint", "ts-native", "--sdk-dir", dir, "--runs", "40", "--messages", "10", "--kills", "2", "--kill-every", "100ms", "--seed", "7"}, &out, &errOut)
	require.NoError(t, err, "stderr:\n%s\nresult: %s", errOut.String(), out.String())
	var res benchChaosResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), "%s", out.String())
	require.Equal(t, 2, res.Kills)
	require.Equal(t, 40, res.RunsAcked)
	require.Equal(t, 40, res.RunsSucceeded+res.RunsFailed)
	require.Zero(t, res.RunsNotTerminal+res.RunsLost+res.DuplicateSteps+res.MessagesLost)
	require.GreaterOrEqual(t, res.StepExecutions, int64(3*res.RunsSucceeded), "every step ran in node")
	require.Positive(t, res.Chaos.DroppedAfter+res.Chaos.Failed+res.Chaos.Hung, "the endpoint misbehaved")
}
